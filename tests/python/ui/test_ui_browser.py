"""The operator's web page (docs/ui.md) in a real headless chromium, against
the real kcache-server: a workload of uploads, hits and misses in two
namespaces, then the page must show each namespace's card with plots that
hold data, the uploaded regions, the misses and the lease in flight, the
hit ratio the server reports, and a clean console. Also: the page fetches
nothing from another origin (a static check of server/ui/index.html), and
without --ui there is no page.

KCACHE_UI_SCREENSHOT=PATH saves a screenshot of the page after the
assertions (docs/ui.png is made so)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import secrets

import pytest

from harness.server import REPO, ServerProcess

PAGE = REPO / "server/ui/index.html"

# label → compile seconds; team-a's regions, then team-b's.
REGIONS_A = {"GPT2Block/cpu:avx512/f32/default/train": 12.5,
             "LlamaDecoderLayer/cpu:avx512/bf16/default/train": 31.0,
             "MLP/cpu:avx512/f32/max-autotune/infer": 4.25}
REGIONS_B = {"BertLayer/cpu:avx2/f32/default/infer": 6.0,
             "T5Block/cpu:avx2/f32/default/train": 18.75}


def _json(reply) -> dict:
    status, _, body = reply
    assert status == 200, body
    return json.loads(body)


def workload(srv: ServerProcess, ns: str, regions: dict[str, float], gets_each: int, misses: int) -> dict:
    """Uploads one bundle per region, reads each `gets_each` times (hits),
    asks for `misses` keys never stored; returns what it did."""
    from harness.bundles import make_bundle, new_key  # kcache._core: not needed by the static check

    hdr = {"X-Kcache-Namespace": ns}
    keys = {}
    for label, seconds in regions.items():
        key = new_key()
        status, _, body = srv.http("PUT", f"/v1/artifacts/{key}", make_bundle(key, compile_seconds=seconds, label=label),
                                   {**hdr, "Content-Type": "application/octet-stream"})
        assert status in (200, 201), body
        keys[label] = key
    hits = saved = 0
    for label, key in keys.items():
        for _ in range(gets_each):
            status, _, body = srv.http("GET", f"/v1/artifacts/{key}", headers=hdr)
            assert status == 200, body[:200]
            hits += 1
            saved += regions[label]
    missed = []
    for _ in range(misses):
        key = new_key()
        status, _, _ = srv.http("GET", f"/v1/artifacts/{key}", headers=hdr)
        assert status == 404
        missed.append(key)
    return {"keys": keys, "hits": hits, "misses": misses, "saved": saved, "missed": missed}


@pytest.fixture
def ui_server(tmp_path, server_binary):
    """A disk-backed kcache-server with --ui and two namespaces (plus
    "default"), in loopback mode: no tokens, the namespace is a header."""
    ns_file = tmp_path / "namespaces.json"
    ns_file.write_text(json.dumps({"namespaces": {
        "team-a": {"quota_bytes": "1GiB", "retention": {"policy": "value", "window": "7d"}, "read_through": ["team-b"]},
        "team-b": {"quota_entries": 1000, "retention": {"policy": "lru"}},
    }}))
    srv = ServerProcess(tmp_path, f"disk:{tmp_path / 'store'}",
                        ["--ui", "--namespaces", str(ns_file), "--hot-cache-bytes", "0"], wait_healthy=True)
    yield srv
    srv.stop()


# What the page shows, read in one script (the page re-renders every 10 s,
# so element handles held across a refresh would go stale).
SNAPSHOT = """
const all = (root, sel, f) => Array.from(root.querySelectorAll(sel), f);
const text = (e) => e.textContent.trim();
return {
  state: document.body.dataset.state,
  error: document.getElementById('error').textContent,
  cards: all(document, 'section.card', (c) => ({
    name: c.dataset.namespace,
    title: text(c.querySelector('h2')),
    head: text(c.querySelector('.card-head')),
    plots: Object.fromEntries(all(c, 'svg.plot', (s) => [s.dataset.plot, Number(s.dataset.points)])),
    bars: Object.fromEntries(all(c, 'svg.plot', (s) => [s.dataset.plot, s.querySelectorAll('rect').length])),
    kpis: Object.fromEntries(all(c, '[data-kpi]', (k) => [k.dataset.kpi, text(k.querySelector('.kpi-value'))])),
    usage: text(c.querySelector('.usage')),
    labels: all(c, 'table.top td.label', text),
    top_keys: all(c, 'table.top td.key', (e) => e.title),
    miss_keys: all(c, 'table.misses td.key', (e) => e.title),
    miss_fields: all(c, 'table.misses td.differing', text),
    lease_keys: all(c, 'table.leases td.key', (e) => e.title),
    leases: text(c.querySelector('table.leases')),
  })),
};
"""


def test_page_shows_the_workload(ui_server, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    srv = ui_server
    did = {"team-a": workload(srv, "team-a", REGIONS_A, gets_each=3, misses=2),
           "team-b": workload(srv, "team-b", REGIONS_B, gets_each=2, misses=3)}
    # A miss explained: one of team-a's missed keys is then compiled and
    # uploaded under a stored region's label, its key explanation differing
    # from that region's in one field (a "target" the stored one lacks).
    from harness.bundles import make_bundle, manifest_for
    explained = did["team-a"]["missed"][0]
    label = next(iter(REGIONS_A))
    explanation = manifest_for(explained, label=label)["explanation"]
    explanation["fields"]["target"] = {"hash": "ee" * 32, "size": 17, "value": '{"isa": "avx2"}'}
    status, _, body = srv.http("PUT", f"/v1/artifacts/{explained}",
                               make_bundle(explained, label=label, explanation=explanation),
                               {"X-Kcache-Namespace": "team-a", "Content-Type": "application/octet-stream"})
    assert status == 201, body
    # A compile in flight in team-b: a lease taken and not yet released.
    leased = secrets.token_hex(32)
    status, _, body = srv.http("POST", f"/v1/leases/{leased}",
                               headers={"X-Kcache-Namespace": "team-b", "X-Kcache-Client": "rank-0"})
    assert status == 201, body

    # The page is the file in the tree, served as HTML.
    status, headers, body = srv.http("GET", "/ui")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert body == PAGE.read_bytes(), "the server serves a stale page: rebuild kcache-server"

    overview = _json(srv.http("GET", "/v1/ui/overview"))
    by_name = {n["name"]: n for n in overview["namespaces"]}
    assert set(by_name) == {"default", "team-a", "team-b"}
    for ns, d in did.items():  # the server counted the workload
        assert (by_name[ns]["hour"]["hits"], by_name[ns]["hour"]["misses"]) == (d["hits"], d["misses"]), by_name[ns]["hour"]
        assert by_name[ns]["day"]["compile_s_saved"] == pytest.approx(d["saved"], rel=1e-6)
    why = {m["key"]: m["explained"] for m in by_name["team-a"]["recent_misses"]}
    assert why[explained]["nearest"] == did["team-a"]["keys"][label], why[explained]
    assert [f["field"] for f in why[explained]["differing"]] == ["target"], why[explained]
    assert why[did["team-a"]["missed"][1]] is None  # never uploaded: nothing to compare yet

    browser.get(f"{srv.url}/ui")
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-state") in ("ready", "error", "auth")
        and len(d.find_elements("css selector", "section.card")) == len(by_name))
    page = browser.execute_script(SNAPSHOT)
    assert page["state"] == "ready", page["error"]

    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe

    cards = {c["name"]: c for c in page["cards"]}
    assert set(cards) == set(by_name)  # every namespace has its card
    assert cards["default"]["labels"] == [] and cards["default"]["plots"] == {"hour": 0, "day": 0}
    for ns, d in did.items():
        c = cards[ns]
        assert c["title"] == ns
        assert c["plots"]["hour"] > 0 and c["plots"]["day"] > 0, c["plots"]
        assert c["bars"]["hour"] >= c["plots"]["hour"] and c["bars"]["day"] == c["plots"]["day"]
        # The top regions: every uploaded label, with its key.
        regions = REGIONS_A if ns == "team-a" else REGIONS_B
        assert set(c["labels"]) == set(regions), c["labels"]
        assert set(c["top_keys"]) == set(d["keys"].values()) | ({explained} if ns == "team-a" else set())
        # The hit ratio the server reports, as the page prints it.
        for window in ("hour", "day"):
            w = by_name[ns][window]
            assert w["hit_ratio"] == pytest.approx(d["hits"] / (d["hits"] + d["misses"]))
            shown = c["kpis"][f"hit-ratio-{window}"]
            assert shown == f"{w['hit_ratio'] * 100:.1f}%", (ns, window, shown, w)
        # The recent misses: the keys asked for (one of team-a's since uploaded).
        assert sorted(c["miss_keys"]) == sorted(d["missed"])
    # Why the explained one missed, as the page shows it: the differing field, the other not uploaded yet.
    fields = dict(zip(cards["team-a"]["miss_keys"], cards["team-a"]["miss_fields"]))
    assert fields[explained].startswith("target") and "vs" in fields[explained], fields
    assert fields[did["team-a"]["missed"][1]] == "not uploaded yet", fields
    # Usage against the quota: team-a has a byte quota, team-b an entry quota only.
    assert "of 1.00 GiB" in cards["team-a"]["usage"], cards["team-a"]["usage"]
    assert "no quota" in cards["team-b"]["usage"] and "of 1,000" in cards["team-b"]["usage"], cards["team-b"]["usage"]
    assert "reads through: team-b" in cards["team-a"]["head"] and "retention: lru" in cards["team-b"]["head"]
    # The lease in flight, in its namespace only.
    assert cards["team-b"]["lease_keys"] == [leased] and "rank-0" in cards["team-b"]["leases"]
    assert cards["team-a"]["lease_keys"] == []

    shot = os.environ.get("KCACHE_UI_SCREENSHOT")
    if shot:
        # The whole page: the window grown to its height plus the window's
        # own frame (outer minus inner height).
        height, frame = browser.execute_script(
            "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]")
        browser.set_window_size(1400, max(1800, int(height) + int(frame)))
        WebDriverWait(browser, 10).until(lambda d: d.find_element("tag name", "body").get_attribute("data-state") == "ready")
        assert browser.save_screenshot(str(pathlib.Path(shot).resolve()))


def test_page_fetches_nothing_from_another_origin():
    """The page is one file: no URL with a scheme, no script or style
    loaded from anywhere, nothing fetched but the overview (same origin)."""
    html = PAGE.read_text()
    assert not re.search(r"https?:", html, re.I), re.search(r".{0,40}https?:.{0,40}", html, re.I).group(0)
    assert not re.search(r"//[a-z0-9.-]+\.[a-z]{2,}", html, re.I), "a protocol-relative URL"
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I)
    for tag in re.findall(r"<link\b[^>]*>", html, re.I):
        href = re.search(r"\bhref\s*=\s*[\"']([^\"']*)", tag)
        assert href is None or href.group(1).startswith("data:"), tag
    assert not re.search(r"<(img|iframe|embed|object|source|audio|video)\b", html, re.I)
    assert not re.search(r"@import|@font-face", html, re.I)
    assert all(u.startswith("data:") for u in re.findall(r"url\(\s*[\"']?([^\"')]*)", html)), "a url() in CSS"
    fetched = re.findall(r"\bfetch\(\s*([A-Za-z_]+|['\"][^'\"]*['\"])", html)
    assert fetched == ["OVERVIEW"] and "const OVERVIEW = 'v1/ui/overview';" in html, fetched
    assert not re.search(r"XMLHttpRequest|WebSocket|EventSource|sendBeacon|importScripts|\beval\(", html)
    # server/CMakeLists.txt embeds the file in a raw string with this delimiter.
    assert ')kcacheui"' not in html


def test_no_page_without_ui(tmp_path, server_binary):
    srv = ServerProcess(tmp_path, f"disk:{tmp_path / 'store'}", wait_healthy=True)
    try:
        for path in ("/ui", "/v1/ui/overview"):
            status, _, body = srv.http("GET", path)
            assert status == 404, (path, status, body)
    finally:
        srv.stop()
