"""Namespaces (docs/namespaces.md) against the real kcache-server: tokens
that act only in their namespaces, reads that never return another
namespace's entry (a generated differential run against a model), a CI
namespace read through by a team and written only by signed uploads,
quotas evicting the namespace's own least valuable entries on disk and
Redis storage, RESP confined to the default namespace, SIGHUP reloads, a
store from before namespaces opening as "default"."""

from __future__ import annotations

import hashlib
import json
import random
import signal

import pytest

from kcache import _core
from harness.resp import RespConnection
from server_harness import KcacheServer, make_bundle, new_key, wait_until

TOKENS = {
    "a": "team-a-writer-token-0001",
    "a_admin": "team-a-admin-token-00001",
    "b": "team-b-writer-token-0001",
    "b_admin": "team-b-admin-token-00001",
    "ci": "ci-writer-token-00000001",
    "dflt": "default-admin-token-0001",
    "ab": "both-teams-reader-token1",
}


def namespaces_doc(ci_key_file, quota_a=None) -> dict:
    team_a = {"tokens": [{"token": TOKENS["a"], "role": "write"}, {"token": TOKENS["a_admin"], "role": "admin"},
                         {"token": TOKENS["ab"], "role": "read"}]}
    if quota_a:
        team_a.update(quota_a)
    return {"namespaces": {
        "default": {"tokens": [{"token": TOKENS["dflt"], "role": "admin"}]},
        "team-a": team_a,
        "team-b": {"tokens": [{"token": TOKENS["b"], "role": "write"},
                              # a digest, not the token, may stand in the file
                              {"sha256": hashlib.sha256(TOKENS["b_admin"].encode()).hexdigest(), "role": "admin"},
                              {"token": TOKENS["ab"], "role": "read"}],
                   "read_through": ["ci"]},
        "ci": {"tokens": [{"token": TOKENS["ci"], "role": "write"}],
               "trust": {"uploads": "signed", "keys": [str(ci_key_file)]}},
    }}


def write_doc(path, doc) -> None:
    path.write_text(json.dumps(doc))


@pytest.fixture
def ci_keys(tmp_path):
    priv, pub = _core.generate_signing_key()
    f = tmp_path / "ci.pub"
    f.write_text(pub)
    return priv, f


@pytest.fixture
def tenancy(tmp_path, ci_keys):
    """A disk-backed server with four namespaces and its namespaces file."""
    ns_file = tmp_path / "namespaces.json"
    write_doc(ns_file, namespaces_doc(ci_keys[1]))
    servers = []

    def start(storage=None, doc=None, args=()):
        if doc is not None:
            write_doc(ns_file, doc)
        srv = KcacheServer(tmp_path, storage=storage or f"disk:{tmp_path / 'store'}",
                           args=["--namespaces", str(ns_file), "--resp-listen", "127.0.0.1:0", *args])
        servers.append(srv)
        return srv

    start.file = ns_file
    yield start
    for s in servers:
        assert s.stop() == 0, s.read_log()[-3000:]


def as_(who: str, ns: str | None = None) -> dict:
    h = {"Authorization": f"Bearer {TOKENS[who]}"}
    if ns:
        h["X-Kcache-Namespace"] = ns
    return h


def put(srv, who, key, bundle, ns=None):
    return srv.request("PUT", f"/v1/artifacts/{key}", body=bundle,
                       headers={"Content-Type": "application/octet-stream", **as_(who, ns)})


def ns_metric(srv, name: str, **labels) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in srv.get("/metrics").body.decode().splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def listed(srv, who, ns=None) -> set[str]:
    r = srv.request("GET", "/v1/entries?limit=1000", headers=as_(who, ns))
    assert r.status == 200, r.body
    return {e["key"] for e in r.json()["entries"]}


def test_tokens_act_only_in_their_namespaces(tenancy):
    srv = tenancy()
    key = new_key()
    bundle_a = make_bundle(key, payload=b"team a's code")
    assert put(srv, "a", key, bundle_a).status == 201
    # The same key in team B is another entry: B never sees A's bytes.
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=as_("b")).status == 404
    bundle_b = make_bundle(key, payload=b"team b's code")
    assert put(srv, "b", key, bundle_b).status == 201
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=as_("a")).body == bundle_a
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=as_("b")).body == bundle_b
    # Naming the other namespace: 403 for read, write, list, evict, delete, leases.
    for method, path, body in [("GET", f"/v1/artifacts/{key}", None), ("HEAD", f"/v1/artifacts/{key}", None),
                               ("PUT", f"/v1/artifacts/{key}", bundle_a), ("GET", "/v1/entries", None),
                               ("GET", f"/v1/entries/{key}", None), ("POST", f"/v1/leases/{key}", None)]:
        r = srv.request(method, path, body=body, headers=as_("a", "team-b"))
        assert r.status == 403, (method, path, r.status, r.body)
    for method, path, body in [("POST", "/v1/evict", b'{"max_bytes": 0}'), ("DELETE", f"/v1/artifacts/{key}", None),
                               ("PUT", f"/v1/entries/{key}/pin", None), ("POST", "/v1/verify", None)]:
        assert srv.request(method, path, body=body, headers=as_("a_admin", "team-b")).status == 403
    # An unknown namespace is the same 403 as a foreign one (names do not leak).
    r = srv.request("GET", f"/v1/artifacts/{key}", headers=as_("a", "no-such-team"))
    assert r.status == 403
    # A's admin evicting everything in A leaves B's entry alone.
    r = srv.request("POST", "/v1/evict", body=b'{"max_bytes": 0}', headers=as_("a_admin"))
    assert r.status == 200 and r.json()["evicted"] == 1
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=as_("b")).body == bundle_b
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=as_("a")).status == 404
    # A token held in two namespaces must name one; it then reads only there.
    r = srv.request("GET", f"/v1/artifacts/{key}", headers=as_("ab"))
    assert r.status == 400 and r.json()["error"] == "namespace_required"
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=as_("ab", "team-b")).body == bundle_b
    assert srv.request("PUT", f"/v1/artifacts/{key}", body=bundle_b, headers=as_("ab", "team-b")).status == 403
    # The default namespace's admin sees none of it.
    assert listed(srv, "dflt") == set()
    # /v1/stats: each token sees the namespaces it holds a role in, no other.
    names = [n["name"] for n in srv.request("GET", "/v1/stats", headers=as_("ab", "team-a")).json()["namespaces"]]
    assert sorted(names) == ["team-a", "team-b"]
    names = [n["name"] for n in srv.request("GET", "/v1/stats", headers=as_("a")).json()["namespaces"]]
    assert names == ["team-a"]


def test_generated_operations_match_a_model_per_namespace(tenancy):
    """A random mix of puts, gets, heads, deletes and listings by every
    token in every namespace (its own or not), checked against a model:
    a dict per namespace and the token table. Seeded, so a failure replays."""
    srv = tenancy()
    rng = random.Random(30)
    roles = {"a": {"team-a": 2}, "a_admin": {"team-a": 3}, "b": {"team-b": 2}, "b_admin": {"team-b": 3},
             "ci": {"ci": 2}, "dflt": {"default": 3}, "ab": {"team-a": 1, "team-b": 1}}
    model: dict[str, dict[str, bytes]] = {"default": {}, "team-a": {}, "team-b": {}, "ci": {}}
    keys = [new_key() for _ in range(6)]
    for step in range(160):
        who = rng.choice(list(roles))
        ns = rng.choice([None, "default", "team-a", "team-b", "ci", "nope"])
        held = roles[who]
        acting = ns if ns else (next(iter(held)) if len(held) == 1 else None)
        role = held.get(acting, 0) if acting else 0
        key = rng.choice(keys)
        op = rng.choice(["put", "get", "get", "head", "delete", "list"])
        ctx = (step, who, ns, op)
        if ns is None and len(held) > 1:
            expected_refusal = 400
        elif role == 0:
            expected_refusal = 403
        else:
            expected_refusal = None
        need = {"put": 2, "get": 1, "head": 1, "delete": 3, "list": 1}[op]
        if expected_refusal is None and role < need:
            expected_refusal = 403
        if op == "put":
            if acting == "ci":
                continue  # signed-only: covered by the read-through test
            bundle = make_bundle(key, payload=rng.randbytes(24))
            r = put(srv, who, key, bundle, ns)
            if expected_refusal:
                assert r.status == expected_refusal, ctx
            else:
                assert r.status in (200, 201), (ctx, r.body)
                model[acting].setdefault(key, bundle)
        elif op in ("get", "head"):
            r = srv.request(op.upper(), f"/v1/artifacts/{key}", headers=as_(who, ns))
            if expected_refusal:
                assert r.status == expected_refusal, ctx
                continue
            want = model[acting].get(key)
            if want is None and acting == "team-b":
                want = model["ci"].get(key)  # read-through
            assert r.status == (200 if want is not None else 404), ctx
            if op == "get" and want is not None:
                assert r.body == want, ctx
        elif op == "delete":
            r = srv.request("DELETE", f"/v1/artifacts/{key}", headers=as_(who, ns))
            if expected_refusal:
                assert r.status == expected_refusal, ctx
            else:
                assert r.status == (204 if key in model[acting] else 404), ctx
                model[acting].pop(key, None)
        else:
            r = srv.request("GET", "/v1/entries?limit=1000", headers=as_(who, ns))
            if expected_refusal:
                assert r.status == expected_refusal, ctx
            else:
                assert {e["key"] for e in r.json()["entries"]} == set(model[acting]), ctx
    # Every namespace holds exactly what the model says.
    for ns, who in [("default", "dflt"), ("team-a", "a_admin"), ("team-b", "b_admin")]:
        assert listed(srv, who) == set(model[ns]), ns


def test_ci_namespace_signed_only_and_read_through(tenancy, ci_keys):
    srv = tenancy()
    priv, _ = ci_keys
    key = new_key()
    unsigned = make_bundle(key)
    r = put(srv, "ci", key, unsigned)
    assert r.status == 400 and r.json()["error"] == "bad_signature" and "namespace 'ci'" in r.json()["message"]
    other_priv, _ = _core.generate_signing_key()
    assert put(srv, "ci", key, make_bundle(key, signing_key_pem=other_priv)).status == 400
    assert srv.request("HEAD", f"/v1/artifacts/{key}", headers=as_("ci")).status == 404
    signed = make_bundle(key, signing_key_pem=priv)
    assert put(srv, "ci", key, signed).status == 201
    # Team B cannot write into ci; it reads through to it.
    assert put(srv, "b", key, signed, ns="ci").status == 403
    before = ns_metric(srv, "kcache_namespace_read_through_hits_total", namespace="team-b", **{"from": "ci"})
    assert before == 0
    r = srv.request("GET", f"/v1/artifacts/{key}", headers=as_("b"))
    assert r.status == 200 and r.body == signed and r.headers.get("x-kcache-read-through") == "ci"
    assert srv.request("HEAD", f"/v1/artifacts/{key}", headers=as_("b")).status == 200
    assert ns_metric(srv, "kcache_namespace_read_through_hits_total", namespace="team-b", **{"from": "ci"}) == 1
    assert ns_metric(srv, "kcache_namespace_hits_total", namespace="team-b") == 1
    # Team A has no link to ci: a miss.
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=as_("a")).status == 404
    assert ns_metric(srv, "kcache_namespace_misses_total", namespace="team-a") == 1
    # Read-through is read-only: B's listing and usage do not include ci's entry.
    assert listed(srv, "b_admin") == set()
    # A job of team B through the real client: a hit on CI's region.
    client = _core.Client(srv.url, TOKENS["b"], "none", log_level="error")
    assert client.get(key) == signed


def test_resp_acts_in_the_namespace_of_its_auth(tenancy):
    """RESP (stock PyTorch's remote caches): a connection acts in the
    namespace its AUTH resolves to (the user name, else the token's only
    namespace), on that namespace's store; the same Redis key in two
    namespaces is two values; a token cannot AUTH into a namespace it holds
    no role in."""
    srv = tenancy()
    a = RespConnection(srv.resp_port)
    with pytest.raises(RuntimeError, match="NOAUTH"):
        a.call("GET", "fxgraph:x")
    assert a.call("AUTH", TOKENS["a"]) == "OK"
    assert a.call("SET", "fxgraph:k1", "team a's graph") == "OK"
    assert a.call("GET", "fxgraph:k1") == "team a's graph"
    with pytest.raises(RuntimeError, match="NOPERM"):
        a.call("DEL", "fxgraph:k1")  # write role only
    b = RespConnection(srv.resp_port)
    assert b.call("AUTH", TOKENS["b"]) == "OK"
    assert b.call("GET", "fxgraph:k1") is None
    assert b.call("EXISTS", "fxgraph:k1") == 0
    assert b.call("SET", "fxgraph:k1", "team b's graph") == "OK"
    assert a.call("GET", "fxgraph:k1") == "team a's graph"
    d = RespConnection(srv.resp_port)
    assert d.call("AUTH", TOKENS["dflt"]) == "OK"
    assert d.call("GET", "fxgraph:k1") is None
    # The entries are in their namespaces' stores, where HTTP lists them.
    assert len(listed(srv, "a_admin")) == 1 and len(listed(srv, "b_admin")) == 1 and listed(srv, "dflt") == set()
    # A token in two namespaces names one with the user name; without it, refused.
    ab = RespConnection(srv.resp_port)
    assert ab.call("AUTH", TOKENS["ab"]) == "OK"
    with pytest.raises(RuntimeError, match="several namespaces"):
        ab.call("GET", "fxgraph:k1")
    assert ab.call("AUTH", "team-b", TOKENS["ab"]) == "OK"
    assert ab.call("GET", "fxgraph:k1") == "team b's graph"
    assert ab.call("AUTH", "team-a", TOKENS["ab"]) == "OK"
    assert ab.call("GET", "fxgraph:k1") == "team a's graph"
    # No role there: WRONGPASS, and the connection keeps its namespace.
    with pytest.raises(RuntimeError, match="WRONGPASS"):
        a.call("AUTH", "team-b", TOKENS["a"])
    assert a.call("GET", "fxgraph:k1") == "team a's graph"
    # A namespace's RESP write counts against its quota like an upload: its usage in /v1/stats.
    stats = {n["name"]: n for n in srv.request("GET", "/v1/stats", headers=as_("ab", "team-a")).json()["namespaces"]}
    assert stats["team-a"]["entries"] == 1 and stats["team-b"]["entries"] == 1
    for c in (a, b, d, ab):
        c.close()


def quota_case(srv, who_a, who_b):
    """Team A under a 4-bundle byte quota, value retention: the upload
    that does not fit evicts A's least valuable entry; B is untouched."""
    size = len(make_bundle(new_key(), payload_bytes=4000))
    b_keys = [new_key() for _ in range(3)]
    for k in b_keys:
        assert put(srv, who_b, k, make_bundle(k, payload_bytes=4000)).status == 201
    # Four entries: compile seconds 1, 40, 2 and 30; the 40 s one pinned.
    costs = [1.0, 40.0, 2.0, 30.0]
    a_keys = [new_key() for _ in costs]
    for k, c in zip(a_keys, costs):
        r = put(srv, who_a, k, make_bundle(k, payload_bytes=4000, compile_seconds=c))
        assert r.status == 201, r.body
        assert r.json()["evicted_for_quota"] == 0
    pin = srv.request("PUT", f"/v1/entries/{a_keys[1]}/pin", headers=as_("a_admin"))
    assert pin.status == 200 and pin.json()["pinned"] is True
    # Fifth upload: over the quota; the 1 s entry (least value) goes.
    k5 = new_key()
    r = put(srv, who_a, k5, make_bundle(k5, payload_bytes=4000, compile_seconds=5.0))
    assert r.status == 201 and r.json()["evicted_for_quota"] == 1, r.body
    assert listed(srv, "a_admin") == {a_keys[1], a_keys[2], a_keys[3], k5}
    # Hits raise value: give the 2 s entry hits; the next eviction takes k5 (5 s, no hits) instead.
    for _ in range(5):
        assert srv.request("GET", f"/v1/artifacts/{a_keys[2]}", headers=as_(who_a)).status == 200
    ranked = srv.request("GET", "/v1/entries?sort=value&order=asc", headers=as_("a_admin")).json()["entries"]
    assert ranked[0]["key"] == k5, [(e["key"][:6], e["value"]) for e in ranked]
    k6 = new_key()
    r = put(srv, who_a, k6, make_bundle(k6, payload_bytes=4000, compile_seconds=3.0))
    assert r.status == 201 and r.json()["evicted_for_quota"] == 1
    assert listed(srv, "a_admin") == {a_keys[1], a_keys[2], a_keys[3], k6}
    # Nothing of team B's was touched.
    assert listed(srv, "b_admin") == set(b_keys)
    # An upload larger than the whole quota: 507 quota_exceeded, nothing stored or evicted.
    big = new_key()
    r = put(srv, who_a, big, make_bundle(big, payload_bytes=5 * size))
    assert r.status == 507 and r.json()["error"] == "quota_exceeded" and "team-a" in r.json()["message"]
    assert listed(srv, "a_admin") == {a_keys[1], a_keys[2], a_keys[3], k6}
    stats = {n["name"]: n for n in srv.request("GET", "/v1/stats", headers=as_("a_admin")).json()["namespaces"]}
    assert stats["team-a"]["bytes"] <= stats["team-a"]["quota_bytes"]
    assert stats["team-a"]["quota_evictions"]["entries"] == 2
    assert ns_metric(srv, "kcache_namespace_quota_evictions_total", namespace="team-a") == 2
    assert ns_metric(srv, "kcache_namespace_quota_refusals_total", namespace="team-a") == 1
    assert ns_metric(srv, "kcache_namespace_quota_evictions_total", namespace="team-b") == 0
    return size


@pytest.mark.parametrize("storage", ["disk", "redis"])
def test_quota_evicts_only_the_namespaces_own_least_valuable(tenancy, ci_keys, storage, request, tmp_path):
    size = len(make_bundle(new_key(), payload_bytes=4000))
    doc = namespaces_doc(ci_keys[1], quota_a={"quota_bytes": 4 * size + size // 2,
                                              "retention": {"policy": "value", "window": "7d"}})
    url = f"disk:{tmp_path / 'store'}" if storage == "disk" else request.getfixturevalue("redis_url")
    # The hot tier answers repeated reads without the store (which then
    # counts at most one hit a second per key); off, every hit is counted.
    srv = tenancy(storage=url, doc=doc, args=["--hot-cache-bytes", "0"])
    quota_case(srv, "a", "b")


def test_entry_quota_and_lru_policy(tenancy, ci_keys):
    doc = namespaces_doc(ci_keys[1], quota_a={"quota_entries": 2, "retention": {"policy": "lru"}})
    srv = tenancy(doc=doc)
    k1, k2, k3 = new_key(), new_key(), new_key()
    assert put(srv, "a", k1, make_bundle(k1, compile_seconds=100)).status == 201
    assert put(srv, "a", k2, make_bundle(k2, compile_seconds=1)).status == 201
    assert srv.request("GET", f"/v1/artifacts/{k1}", headers=as_("a")).status == 200  # k1 most recent
    # LRU ignores value: k2 (1 s to compile) is the least recently used, so it goes.
    assert put(srv, "a", k3, make_bundle(k3)).status == 201
    assert listed(srv, "a_admin") == {k1, k3}


def test_bad_namespace_files_refuse_to_start(tmp_path):
    cases = {
        "not json": "{",
        "bad name": json.dumps({"namespaces": {"Team A": {}}}),
        "unknown link": json.dumps({"namespaces": {"a": {"read_through": ["ghost"]}}}),
        "signed without keys": json.dumps({"namespaces": {"a": {"trust": {"uploads": "signed"}}}}),
        "bad quota": json.dumps({"namespaces": {"a": {"quota_bytes": "lots"}}}),
        "unknown field": json.dumps({"namespaces": {"a": {"quota": 1}}}),
        "short token": json.dumps({"namespaces": {"a": {"tokens": [{"token": "x", "role": "read"}]}}}),
    }
    for why, text in cases.items():
        f = tmp_path / "ns.json"
        f.write_text(text)
        with pytest.raises(RuntimeError) as e:
            KcacheServer(tmp_path, args=["--namespaces", str(f)])
        assert "namespaces" in str(e.value) or "namespace" in str(e.value), (why, str(e.value)[-500:])
        assert "x\"" not in str(e.value)


def test_sighup_adds_a_namespace_and_a_bad_file_keeps_the_old(tenancy, ci_keys):
    srv = tenancy()
    token = "team-c-writer-token-0001"
    key = new_key()
    headers = {"Authorization": f"Bearer {token}"}
    assert srv.request("HEAD", f"/v1/artifacts/{key}", headers=headers).status == 401
    doc = namespaces_doc(ci_keys[1])
    doc["namespaces"]["team-c"] = {"tokens": [{"token": token, "role": "write"}]}
    write_doc(tenancy.file, doc)
    srv.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: srv.read_log().count("SIGHUP: reload done") >= 1, 30, "no reload")
    bundle = make_bundle(key)
    r = srv.request("PUT", f"/v1/artifacts/{key}", body=bundle, headers=headers)
    assert r.status == 201 and r.json()["namespace"] == "team-c"
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=as_("a")).status == 404
    tenancy.file.write_text("{ not json")
    srv.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: srv.read_log().count("SIGHUP: reload done") >= 2, 30, "no second reload")
    assert "not reloaded" in srv.read_log()
    assert srv.request("GET", f"/v1/artifacts/{key}", headers=headers).body == bundle


def test_a_store_from_before_namespaces_opens_as_default(tmp_path, ci_keys):
    store = f"disk:{tmp_path / 'store'}"
    old = KcacheServer(tmp_path, storage=store)
    key = new_key()
    bundle = make_bundle(key)
    assert old.put_artifact(key, bundle).status == 201
    assert old.stop() == 0
    ns_file = tmp_path / "ns.json"
    write_doc(ns_file, namespaces_doc(ci_keys[1]))
    new = KcacheServer(tmp_path, storage=store, args=["--namespaces", str(ns_file)])
    try:
        assert new.request("GET", f"/v1/artifacts/{key}", headers=as_("dflt")).body == bundle
        assert new.request("GET", f"/v1/artifacts/{key}", headers=as_("a")).status == 404
        assert listed(new, "dflt") == {key}
    finally:
        assert new.stop() == 0


def test_client_namespace_and_node_tier_apart(tenancy, tmp_path):
    srv = tenancy()
    node = tmp_path / "node"
    ca = _core.Client(srv.url, TOKENS["a"], str(node), namespace="team-a", log_level="error")
    key = new_key()
    bundle = make_bundle(key)
    ca.put(key, bundle)
    assert listed(srv, "a_admin") == {key}
    assert listed(srv, "b_admin") == set()
    assert ca.config["namespace"] == "team-a"
    assert list((node / "namespaces" / "team-a").rglob(key)), "the node tier keeps team A's bundle under its namespace"
    cb = _core.Client(srv.url, TOKENS["b"], str(node), namespace="team-b", log_level="error")
    assert cb.get(key) is None  # same node, same key: not team B's
    with pytest.raises(Exception, match="KCACHE_NAMESPACE"):
        _core.Client(srv.url, TOKENS["a"], "none", namespace="Team A")


def test_resp_set_is_admitted_against_the_quota(tenancy, ci_keys):
    doc = namespaces_doc(ci_keys[1], quota_a={"quota_entries": 2, "quota_bytes": 64 * 1024})
    srv = tenancy(doc=doc)
    a = RespConnection(srv.resp_port)
    assert a.call("AUTH", TOKENS["a"]) == "OK"
    for k in ("fxgraph:1", "fxgraph:2", "fxgraph:3"):
        assert a.call("SET", k, "v" * 100) == "OK"
    # Two entries at most: the least valuable (all cost 0 s: the least recently used) went.
    assert a.call("GET", "fxgraph:1") is None
    assert a.call("GET", "fxgraph:3") == "v" * 100
    assert len(listed(srv, "a_admin")) == 2
    with pytest.raises(RuntimeError, match="OOM.*team-a"):
        a.call("SET", "fxgraph:big", "x" * (65 * 1024))
    assert ns_metric(srv, "kcache_namespace_quota_evictions_total", namespace="team-a") >= 1
    a.close()
