"""Entries, evict, verify, stats, metrics, health (docs/protocol.md)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from server_harness import make_bundle, new_key


@pytest.fixture
def populated(start_server):
    srv = start_server()
    keys = {}
    specs = [("GPT2Block/cpu:avx512/f32/default/train", 100), ("GPT2Block/cpu:avx512/f32/default/infer", 200),
             ("GPT2Attn/cuda:sm_90/bf16/max-autotune/train", 300), ("LlamaMLP/cuda:sm_90/bf16/default/train", 400)]
    for label, n in specs:
        k = new_key()
        b = make_bundle(k, payload=bytes([7]) * n, label=label)
        assert srv.put_artifact(k, b).status == 201
        keys[label] = (k, len(b))
    return srv, keys


def test_entries_filters_sort_and_cursor(populated):
    srv, keys = populated
    all_ = srv.get("/v1/entries").json()
    assert len(all_["entries"]) == 4 and all_["next_cursor"] is None
    e = all_["entries"][0]
    assert set(e) == {"key", "size", "created_ms", "last_access_ms", "hits", "label", "target", "mode", "dtype",
                      "toolchain", "compile_ms", "pinned", "value"}
    assert [x["key"] for x in all_["entries"]] == sorted(x["key"] for x in all_["entries"])

    gpu = srv.get("/v1/entries?target=cuda:sm_90").json()["entries"]
    assert {x["label"] for x in gpu} == {"GPT2Attn/cuda:sm_90/bf16/max-autotune/train",
                                         "LlamaMLP/cuda:sm_90/bf16/default/train"}
    gpt = srv.get("/v1/entries?label_prefix=GPT2Block%2F").json()["entries"]
    assert len(gpt) == 2
    ma = srv.get("/v1/entries?mode=max-autotune").json()["entries"]
    assert len(ma) == 1
    tc = srv.get("/v1/entries?toolchain=torch-2.13.0").json()["entries"]
    assert len(tc) == 4
    assert srv.get("/v1/entries?toolchain=torch-1.0").json()["entries"] == []

    by_size = srv.get("/v1/entries?sort=size&order=desc").json()["entries"]
    sizes = [x["size"] for x in by_size]
    assert sizes == sorted(sizes, reverse=True)

    page1 = srv.get("/v1/entries?sort=size&limit=3").json()
    assert len(page1["entries"]) == 3 and page1["next_cursor"]
    import urllib.parse
    page2 = srv.get("/v1/entries?sort=size&limit=3&cursor=" + urllib.parse.quote(page1["next_cursor"], safe="")).json()
    assert len(page2["entries"]) == 1 and page2["next_cursor"] is None
    seen = {x["key"] for x in page1["entries"]} | {x["key"] for x in page2["entries"]}
    assert seen == {k for k, _ in keys.values()}


@pytest.mark.parametrize("query", ["sort=colour", "limit=0", "limit=5000", "order=sideways", "bogus=1", "limit=abc"])
def test_entries_bad_query_is_400(server, query):
    r = server.get(f"/v1/entries?{query}")
    assert r.status == 400 and r.json()["error"] == "bad_query"


def test_entry_detail_has_manifest_and_sections(populated):
    srv, keys = populated
    k, size = keys["GPT2Block/cpu:avx512/f32/default/train"]
    d = srv.get(f"/v1/entries/{k}").json()
    assert d["entry"]["key"] == k and d["entry"]["size"] == size
    assert d["manifest"]["key"] == k and d["manifest"]["label"].startswith("GPT2Block/")
    assert d["bundle"]["format_version"] == 1 and len(d["bundle"]["digest"]) == 64
    assert d["bundle"]["sections"][0]["name"] == "mega_cache"
    assert d["bundle"]["sections"][0]["uncompressed_bytes"] == 100
    assert srv.get(f"/v1/entries/{new_key()}").status == 404


def test_evict_dry_run_then_real(populated):
    srv, keys = populated
    r = srv.request("POST", "/v1/evict", body=b'{"target": "cuda:sm_90", "dry_run": true}')
    assert r.status == 200
    body = r.json()
    assert body["evicted"] == 2 and body["dry_run"] is True and len(body["keys"]) == 2
    assert len(srv.get("/v1/entries").json()["entries"]) == 4
    r = srv.request("POST", "/v1/evict", body=b'{"target": "cuda:sm_90"}')
    assert r.json()["evicted"] == 2 and r.json()["bytes"] > 0
    assert len(srv.get("/v1/entries").json()["entries"]) == 2
    r = srv.request("POST", "/v1/evict", body=b'{"max_bytes": 0, "label_prefix": "GPT2Block/"}')
    assert r.json()["evicted"] == 2
    assert srv.get("/v1/stats").json()["evictions"]["entries"] == 4


@pytest.mark.parametrize("body,code", [
    (b"{not json", "bad_json"),
    (b"[1,2]", "bad_json"),
    (b"{}", "bad_policy"),
    (b'{"dry_run": true}', "bad_policy"),
    (b'{"max_bytes": "lots"}', "bad_policy"),
    (b'{"max_bytes": -1}', "bad_policy"),
    (b'{"older_than_s": "old"}', "bad_policy"),
    (b'{"target": 5}', "bad_policy"),
    (b'{"max_byte": 100}', "bad_policy"),
    (b"", "bad_json"),
])
def test_evict_malformed_is_400(populated, body, code):
    srv, _ = populated
    r = srv.request("POST", "/v1/evict", body=body)
    assert r.status == 400, r.body
    assert r.json()["error"] == code
    assert len(srv.get("/v1/entries").json()["entries"]) == 4  # nothing harmed


def test_evict_accepts_size_strings(populated):
    srv, _ = populated
    r = srv.request("POST", "/v1/evict", body=b'{"max_bytes": "1G", "dry_run": true}')
    assert r.status == 200 and r.json()["evicted"] == 0


def test_verify(populated):
    srv, _ = populated
    r = srv.request("POST", "/v1/verify")
    assert r.status == 200 and r.json() == {"checked": 4, "corrupt": [], "removed": 0}
    r = srv.request("POST", "/v1/verify?remove=true")
    assert r.status == 200 and r.json()["checked"] == 4
    assert srv.request("POST", "/v1/verify?remove=maybe").status == 400


def test_stats_breakdown(populated):
    srv, keys = populated
    k, _ = keys["GPT2Block/cpu:avx512/f32/default/train"]
    srv.get(f"/v1/artifacts/{k}")
    srv.get(f"/v1/artifacts/{new_key()}")
    s = srv.get("/v1/stats").json()
    assert s["backend"] == "memory"
    assert s["storage"]["entries"] == 4
    assert s["hits"] >= 1 and s["misses"] >= 1 and 0 < s["hit_ratio"] < 1
    assert s["uploads"]["stored"] == 4
    assert s["by_target"]["cpu:avx512"]["entries"] == 2
    assert s["by_target"]["cuda:sm_90"]["entries"] == 2
    assert s["by_target"]["cpu:avx512"]["hits"] >= 1
    assert s["by_mode"]["default"]["entries"] == 3 and s["by_mode"]["max-autotune"]["entries"] == 1
    assert s["by_mode"]["default"]["uploads_stored"] == 3
    assert s["requests"] > 0 and s["bytes_in"] > 0 and s["bytes_out"] > 0
    assert s["connections"]["active"] >= 1


def test_metrics_exposition(populated):
    srv, keys = populated
    k, _ = keys["GPT2Block/cpu:avx512/f32/default/train"]
    srv.get(f"/v1/artifacts/{k}")
    srv.get(f"/v1/artifacts/{new_key()}")
    srv.request("POST", f"/v1/leases/{new_key()}")
    r = srv.get("/metrics")
    assert r.status == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.body.decode()
    for name in ["kcache_http_requests_total", "kcache_http_request_duration_seconds_bucket",
                 "kcache_cache_hits_total", "kcache_cache_misses_total", "kcache_received_bytes_total",
                 "kcache_sent_bytes_total", "kcache_entries", "kcache_evictions_total",
                 "kcache_leases_granted_total", "kcache_leases_renewed_total", "kcache_leases_waited_total",
                 "kcache_leases_expired_total", "kcache_storage_errors_total"]:
        assert re.search(rf"^# TYPE {name.removesuffix('_bucket')} ", text, re.M), name
    assert re.search(r'^kcache_http_requests_total\{route="/v1/artifacts/\{key\}",method="PUT",status="201"\} 4$',
                     text, re.M)
    assert re.search(r'^kcache_http_request_duration_seconds_bucket\{route="/v1/artifacts/\{key\}",le="\+Inf"\} \d+$',
                     text, re.M)
    assert re.search(r"^kcache_entries 4$", text, re.M)
    assert re.search(r"^kcache_leases_granted_total 1$", text, re.M)
    check_exposition_format(text)
    promtool = shutil.which("promtool")
    if promtool:
        p = subprocess.run([promtool, "check", "metrics"], input=r.body, capture_output=True, timeout=30)
        assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def check_exposition_format(text: str) -> None:
    """A strict reading of the text format 0.0.4, for machines without promtool."""
    assert text.endswith("\n")
    typed: dict[str, str] = {}
    helped: set[str] = set()
    sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"'
                        r'(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*)\})? (-?[0-9.e+-]+|\+Inf|NaN)$')
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in helped, f"duplicate HELP {name}"
            helped.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert kind in {"counter", "gauge", "histogram", "summary", "untyped"}
            assert name not in typed, f"duplicate TYPE {name}"
            if kind == "counter":
                assert name.endswith("_total"), name
            typed[name] = kind
        else:
            m = sample.match(line)
            assert m, f"bad sample line {line!r}"
            name = m.group(1)
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in typed or (base in typed and typed[base] == "histogram"), f"untyped sample {name}"
    assert set(typed) == helped


def test_health_and_ready(server):
    r = server.get("/healthz")
    assert r.status == 200 and r.json() == {"status": "ok"}
    r = server.get("/readyz")
    assert r.status == 200 and r.json() == {"status": "ready", "storage": "memory"}


def test_readyz_503_when_storage_is_unreachable(start_server, redis_server):
    """With Redis storage, /readyz follows Redis: 200 while up, 503 once it is gone."""
    srv = start_server(storage=f"redis://127.0.0.1:{redis_server.port}/0?connect_timeout_ms=200&timeout_ms=500")
    r = srv.get("/readyz")
    assert r.status == 200 and r.json()["storage"] == "redis"
    redis_server.stop()
    r = srv.get("/readyz")
    assert r.status == 503 and r.json()["error"] == "storage_unavailable"
    r = srv.get(f"/v1/artifacts/{new_key()}")
    assert r.status == 503 and r.json()["error"] == "storage_unavailable"
    assert "storage_errors_total" in srv.get("/metrics").body.decode()
    assert srv.get("/v1/stats").json()["storage_errors"] >= 1
