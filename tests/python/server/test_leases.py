"""Leases: POST/DELETE /v1/leases/{key}, renew, GET /v1/leases, PUT releasing."""

from __future__ import annotations

import re
import threading
import time

from server_harness import make_bundle, new_key


def lease(srv, key, **kw):
    return srv.request("POST", f"/v1/leases/{key}", **kw)


def test_grant_conflict_exists(server):
    key = new_key()
    r = lease(server, key)
    assert r.status == 201
    body = r.json()
    assert re.fullmatch(r"[0-9a-f]{32}", body["lease"])
    assert body["ttl_ms"] == 60000
    assert r.headers["x-kcache-lease"] == body["lease"]

    r2 = lease(server, key)
    assert r2.status == 409
    b2 = r2.json()
    assert b2["error"] == "lease_held" and b2["message"]
    assert 0 < b2["remaining_ms"] <= 60000

    put = server.put_artifact(key, make_bundle(key), headers={"X-Kcache-Lease": body["lease"]})
    assert put.status == 201 and put.json()["lease_released"] is True
    r3 = lease(server, key)
    assert r3.status == 200 and r3.json() == {"exists": True}


def test_renew_and_foreign_or_missing_token(server):
    key = new_key()
    token = lease(server, key).json()["lease"]
    r = server.request("POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": token})
    assert r.status == 200 and r.json() == {"lease": token, "ttl_ms": 60000}
    foreign = server.request("POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": "0" * 32})
    assert foreign.status == 409 and foreign.json()["error"] == "not_holder"
    assert foreign.json()["remaining_ms"] > 0
    missing = server.request("POST", f"/v1/leases/{key}/renew")
    assert missing.status == 400 and missing.json()["error"] == "missing_lease"
    none = server.request("POST", f"/v1/leases/{new_key()}/renew", headers={"X-Kcache-Lease": token})
    assert none.status == 409 and none.json()["error"] == "no_lease"


def test_release_needs_the_token(server):
    key = new_key()
    token = lease(server, key).json()["lease"]
    assert server.request("DELETE", f"/v1/leases/{key}").status == 400
    wrong = server.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": "f" * 32})
    assert wrong.status == 409 and wrong.json()["error"] == "not_holder"
    ok = server.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token})
    assert ok.status == 204 and ok.body == b""
    again = server.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token})
    assert again.status == 409 and again.json()["error"] == "no_lease"
    # Released: the next client gets it at once.
    assert lease(server, key).status == 201


def test_put_with_foreign_token_stores_but_keeps_lease(server):
    key = new_key()
    token = lease(server, key).json()["lease"]
    r = server.put_artifact(key, make_bundle(key), headers={"X-Kcache-Lease": "1" * 32})
    assert r.status == 201 and r.json()["lease_released"] is False
    held = [l for l in server.get("/v1/leases").json()["leases"] if l["key"] == key]
    assert len(held) == 1
    assert server.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token}).status == 204


def test_list_leases(server):
    key = new_key()
    lease(server, key, headers={"X-Kcache-Client": "rank-3"})
    body = server.get("/v1/leases").json()
    assert body["ttl_ms"] == 60000
    mine = [l for l in body["leases"] if l["key"] == key]
    assert len(mine) == 1
    l = mine[0]
    assert l["holder"].startswith("127.0.0.1:") and l["holder"].endswith(" rank-3")
    assert l["remaining_ms"] > 0 and l["age_ms"] >= 0 and l["renewals"] == 0
    assert l["acquired_unix_ms"] > 1_600_000_000_000
    assert "lease" not in l and "token" not in l  # tokens are never shown


def test_expired_holder_is_overtaken_after_ttl(start_server):
    srv = start_server(args=["--lease-ttl-ms", "600"])
    key = new_key()
    first = lease(srv, key).json()["lease"]  # this holder "dies": it never renews
    assert lease(srv, key).status == 409
    time.sleep(0.75)
    r = lease(srv, key)
    assert r.status == 201 and r.json()["lease"] != first
    # The dead holder's token is worthless now.
    late = srv.request("POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": first})
    assert late.status == 409 and late.json()["error"] == "not_holder"
    stats = srv.get("/v1/stats").json()
    assert stats["leases"]["expired"] >= 1


def test_renewing_holder_is_never_overtaken(start_server):
    # A TTL with seconds of slack over the renew interval (a loaded machine
    # may delay a renew by much more than 0.35 s), and a check that runs
    # until the lease is provably older than two TTLs: without its renewals
    # it would have expired and been granted to the contender.
    ttl_s = 3.0
    srv = start_server(args=["--lease-ttl-ms", str(int(ttl_s * 1000))])
    key = new_key()
    token = lease(srv, key).json()["lease"]
    acquired = time.monotonic()  # the lease was granted before this: its age is at least now - acquired
    stop = threading.Event()
    failures = []
    renewed = []

    def renew_loop():
        while not stop.is_set():
            r = srv.request("POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": token})
            if r.status == 200:
                renewed.append(1)
            else:
                failures.append(r.status)
            stop.wait(0.2)

    t = threading.Thread(target=renew_loop)
    t.start()
    try:
        contended = 0
        while time.monotonic() - acquired <= 2 * ttl_s or len(renewed) < 3:
            r = lease(srv, key)
            assert r.status == 409, r.body
            contended += 1
            time.sleep(0.1)
    finally:
        stop.set()
        t.join()
    assert not failures
    assert len(renewed) >= 3 and contended >= 1
    assert srv.put_artifact(key, make_bundle(key), headers={"X-Kcache-Lease": token}).json()["lease_released"]


def test_wait_without_lease_is_immediate_404(server):
    key = new_key()
    t0 = time.monotonic()
    r = server.get(f"/v1/artifacts/{key}?wait_ms=120000", timeout=150)
    assert r.status == 404
    assert time.monotonic() - t0 < 30  # at once, not after the 120 s wait


def test_wait_ends_when_holder_releases(server):
    key = new_key()
    token = lease(server, key).json()["lease"]
    out = {}

    def waiter():
        t0 = time.monotonic()
        out["r"] = server.get(f"/v1/artifacts/{key}?wait_ms=120000", timeout=150)
        out["s"] = time.monotonic() - t0

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    assert server.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token}).status == 204
    t.join()
    assert out["r"].status == 404
    assert out["s"] < 30  # the release ended it, not the 120 s wait


def test_wait_ends_at_wait_ms(server):
    key = new_key()
    lease(server, key)
    t0 = time.monotonic()
    r = server.get(f"/v1/artifacts/{key}?wait_ms=300")
    took = time.monotonic() - t0
    assert r.status == 404
    assert 0.25 < took < 30  # never before wait_ms; the upper bound only catches a hang


def test_bad_wait_ms_is_400(server):
    r = server.get(f"/v1/artifacts/{new_key()}?wait_ms=soon")
    assert r.status == 400 and r.json()["error"] == "bad_query"
