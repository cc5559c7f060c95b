"""Replicas on one Redis: two kcache-server processes on one real
redis-server share leases (a lease taken through A is 409 through B), wake
each other's waiters (a GET ?wait_ms on B returns the artifact PUT through
A), and a dead holder's lease expires so a client of the other replica takes
over. Lease counters live in Redis and are summed across replicas."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from server_harness import REDIS, make_bundle, metric_value, new_key, wait_for_metric_at_least

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server not installed")


@pytest.fixture
def pair(start_server, redis_url):
    def start(*extra):
        return [start_server(storage=redis_url, args=list(extra)) for _ in range(2)]
    return start


def wait_subscribed(*servers, timeout=10):
    deadline = time.monotonic() + timeout
    for srv in servers:
        while "subscribed to kcache:landed" not in srv.read_log():
            assert time.monotonic() < deadline, srv.read_log()[-2000:]
            time.sleep(0.02)


def test_lease_through_a_is_seen_by_b(pair):
    a, b = pair()
    key = new_key()
    granted = a.request("POST", f"/v1/leases/{key}", headers={"X-Kcache-Client": "rank-0"})
    assert granted.status == 201
    token = granted.json()["lease"]
    held = b.request("POST", f"/v1/leases/{key}")
    assert held.status == 409 and 0 < held.json()["remaining_ms"] <= 60000
    # B can renew and list A's lease; only the token holder may renew.
    assert b.request("POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": token}).status == 200
    assert b.request("POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": "0" * 32}).status == 409
    leases = b.get("/v1/leases").json()["leases"]
    assert [l["key"] for l in leases] == [key]
    assert leases[0]["holder"].endswith("rank-0") and leases[0]["renewals"] == 1
    assert token not in b.get("/v1/leases").body.decode()
    # Released through B, it is free through A.
    assert b.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token}).status == 204
    assert a.request("POST", f"/v1/leases/{key}").status == 201
    # Counters are the cluster's, whichever replica is asked.
    sa, sb = a.get("/v1/stats").json()["leases"], b.get("/v1/stats").json()["leases"]
    for field in ("granted", "renewed", "released", "active"):
        assert sa[field] == sb[field]
    assert sa["granted"] == 2 and sa["renewed"] == 1 and sa["released"] == 1 and sa["active"] == 1


def test_waiter_on_b_gets_the_put_through_a(pair):
    a, b = pair()
    wait_subscribed(a, b)
    key = new_key()
    token = a.request("POST", f"/v1/leases/{key}").json()["lease"]
    got = {}

    def wait():
        t0 = time.monotonic()
        r = b.get(f"/v1/artifacts/{key}?wait_ms=120000", timeout=150)
        got.update(status=r.status, body=r.body, waited=r.headers.get("x-kcache-waited-ms"),
                   seconds=time.monotonic() - t0)

    waited_before = metric_value(b, "kcache_leases_waited_total")
    t = threading.Thread(target=wait)
    t.start()
    # The GET is parked on B: B counts a waiting GET just before it parks.
    wait_for_metric_at_least(b, "kcache_leases_waited_total", waited_before + 1, 60,
                             "the GET did not park on B")
    assert t.is_alive()
    bundle = make_bundle(key)
    put = a.put_artifact(key, bundle, headers={"X-Kcache-Lease": token})
    assert put.status == 201 and put.json()["lease_released"] is True
    t.join(150)
    assert got["status"] == 200 and got["body"] == bundle
    assert got["waited"] is not None
    # Woken by the landing (pub/sub), not by the 60 s lease expiry or the
    # 120 s wait: a bound far from both, safe on a loaded machine.
    assert got["seconds"] < 30


def test_release_on_a_ends_the_wait_on_b(pair):
    a, b = pair()
    wait_subscribed(a, b)
    key = new_key()
    token = a.request("POST", f"/v1/leases/{key}").json()["lease"]
    got = {}

    def wait():
        t0 = time.monotonic()
        got["status"] = b.get(f"/v1/artifacts/{key}?wait_ms=120000", timeout=150).status
        got["seconds"] = time.monotonic() - t0

    waited_before = metric_value(b, "kcache_leases_waited_total")
    t = threading.Thread(target=wait)
    t.start()
    # The GET is parked on B: B counts a waiting GET just before it parks.
    wait_for_metric_at_least(b, "kcache_leases_waited_total", waited_before + 1, 60,
                             "the GET did not park on B")
    assert a.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token}).status == 204
    t.join(150)
    assert got["status"] == 404 and got["seconds"] < 30  # the release, not the 120 s wait


def test_holder_death_lets_the_other_replica_take_over(pair):
    a, b = pair("--lease-ttl-ms", "1500")
    key = new_key()
    assert a.request("POST", f"/v1/leases/{key}").status == 201
    a.proc.send_signal(signal.SIGKILL)  # the holder's server dies with it; nobody renews
    a.proc.wait(10)
    a.proc.returncode = 0  # the fixture's clean-exit check does not apply to a killed replica
    t0 = time.monotonic()
    first = b.request("POST", f"/v1/leases/{key}")
    assert first.status == 409
    # A waiter on B gives up when the lease runs out (404), without polling.
    r = b.get(f"/v1/artifacts/{key}?wait_ms=120000", timeout=150)
    assert r.status == 404
    assert time.monotonic() - t0 < 30  # the 1.5 s TTL ended it, not the 120 s wait
    took = b.request("POST", f"/v1/leases/{key}")
    assert took.status == 201
    assert b.get("/v1/stats").json()["leases"]["expired"] >= 1
    bundle = make_bundle(key)
    assert b.put_artifact(key, bundle, headers={"X-Kcache-Lease": took.json()["lease"]}).status == 201
    assert b.get(f"/v1/artifacts/{key}").body == bundle
