"""The in-memory hot tier (--hot-cache-bytes) never serves what the server
removed: DELETE, /v1/evict and /v1/verify?remove=true reach it; and the
backend still sees hot entries (hits, last access) for its LRU."""

from __future__ import annotations

import json
import time

from server_harness import make_bundle, new_key


def stored_and_hot(srv, key=None):
    key = key or new_key()
    bundle = make_bundle(key)
    assert srv.put_artifact(key, bundle).status == 201
    for _ in range(3):
        r = srv.get(f"/v1/artifacts/{key}")
        assert r.status == 200 and r.body == bundle
    return key


def test_delete_reaches_the_hot_tier(start_server, tmp_path):
    srv = start_server(storage=f"disk:{tmp_path}/d")
    key = stored_and_hot(srv)
    assert srv.request("DELETE", f"/v1/artifacts/{key}").status == 204
    assert srv.get(f"/v1/artifacts/{key}").status == 404


def test_evict_reaches_the_hot_tier(start_server, tmp_path):
    srv = start_server(storage=f"disk:{tmp_path}/d")
    key = stored_and_hot(srv)
    r = srv.request("POST", "/v1/evict", body=json.dumps({"max_bytes": 0}).encode())
    assert r.status == 200 and key in r.json()["keys"]
    assert srv.get(f"/v1/artifacts/{key}").status == 404


def listed(srv, key):
    # Listing does not count as an access (nor does GET /v1/entries/{key}).
    return next(e for e in srv.get("/v1/entries?limit=1000").json()["entries"] if e["key"] == key)


def test_hot_hits_are_counted_and_touch_the_backend(start_server, tmp_path):
    srv = start_server(storage=f"disk:{tmp_path}/d")
    key = stored_and_hot(srv)
    before = listed(srv, key)
    assert before["hits"] == 1  # the first GET read the backend; the next two were hot
    time.sleep(1.1)
    assert srv.get(f"/v1/artifacts/{key}").status == 200  # hot, and due for a touch
    deadline = time.monotonic() + 5
    while listed(srv, key)["hits"] == before["hits"] and time.monotonic() < deadline:
        time.sleep(0.05)
    after = listed(srv, key)
    assert after["hits"] == before["hits"] + 1
    assert after["last_access_ms"] > before["last_access_ms"]
    assert srv.get("/v1/stats").json()["hits"] == 4


def test_hot_tier_off(start_server, tmp_path):
    srv = start_server(storage=f"disk:{tmp_path}/d", args=["--hot-cache-bytes", "0"])
    key = stored_and_hot(srv)
    assert srv.request("DELETE", f"/v1/artifacts/{key}").status == 204
    assert srv.get(f"/v1/artifacts/{key}").status == 404
