"""Replicas on a Redis Cluster: two kcache-server processes on a real
cluster of three masters and three replicas (loopback, random ports) share
leases through the cluster (the lease keys share the hash tag {leases}, so
one master holds them), and a landing PUT through A wakes a waiter on B
although A and B subscribe at different nodes of the cluster (Cluster
PUBLISH reaches every node, replicas included). Artifacts stored through
one replica are read through the other."""

from __future__ import annotations

import threading
import time

import pytest

from cluster_harness import REDIS_CLI, RedisCluster, cli
from server_harness import REDIS, make_bundle, metric_value, new_key, wait_for_metric_at_least

pytestmark = pytest.mark.skipif(REDIS is None or REDIS_CLI is None, reason="redis-server / redis-cli not installed")


@pytest.fixture
def cluster(tmp_path):
    c = RedisCluster(tmp_path / "cluster")
    yield c
    c.stop()


@pytest.fixture
def pair(start_server, cluster):
    """Server A subscribes at a master, server B at a replica of another master."""
    masters = [p for p in cluster.ports if cluster.role(p) == "master"]
    replicas = [p for p in cluster.ports if cluster.role(p) == "slave"]
    a = start_server(storage=cluster.url(masters[0]))
    b = start_server(storage=cluster.url(replicas[-1]))
    return a, b, masters[0], replicas[-1]


def wait_subscribed(srv, port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while f"subscribed to kcache:landed at 127.0.0.1:{port}" not in srv.read_log():
        assert time.monotonic() < deadline, srv.read_log()[-2000:]
        time.sleep(0.02)


def test_lease_through_a_is_seen_by_b(pair):
    a, b, _, _ = pair
    key = new_key()
    granted = a.request("POST", f"/v1/leases/{key}", headers={"X-Kcache-Client": "rank-0"})
    assert granted.status == 201
    token = granted.json()["lease"]
    assert b.request("POST", f"/v1/leases/{key}").status == 409
    assert b.request("POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": token}).status == 200
    assert [l["key"] for l in b.get("/v1/leases").json()["leases"]] == [key]
    assert b.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token}).status == 204
    assert a.request("POST", f"/v1/leases/{key}").status == 201
    sa, sb = a.get("/v1/stats").json()["leases"], b.get("/v1/stats").json()["leases"]
    assert sa["granted"] == sb["granted"] == 2 and sa["released"] == sb["released"] == 1


def test_landing_through_a_wakes_a_waiter_on_b_at_another_node(pair):
    a, b, a_node, b_node = pair
    wait_subscribed(a, a_node)
    wait_subscribed(b, b_node)  # a replica: PUBLISH reaches it over the cluster bus
    key = new_key()
    token = a.request("POST", f"/v1/leases/{key}").json()["lease"]
    got = {}

    def wait():
        t0 = time.monotonic()
        r = b.get(f"/v1/artifacts/{key}?wait_ms=120000", timeout=150)
        got.update(status=r.status, body=r.body, seconds=time.monotonic() - t0)

    waited_before = metric_value(b, "kcache_leases_waited_total")
    t = threading.Thread(target=wait)
    t.start()
    # The GET is parked on B: B counts a waiting GET just before it parks.
    wait_for_metric_at_least(b, "kcache_leases_waited_total", waited_before + 1, 60,
                             "the GET did not park on B")
    assert t.is_alive()
    bundle = make_bundle(key)
    put = a.put_artifact(key, bundle, headers={"X-Kcache-Lease": token})
    assert put.status == 201
    t.join(150)
    assert got["status"] == 200 and got["body"] == bundle
    # Woken by the landing, not by the 60 s lease expiry or the 120 s wait.
    assert got["seconds"] < 30


def test_artifacts_spread_over_masters_and_read_through_either(pair, cluster):
    a, b, _, _ = pair
    keys = [new_key() for _ in range(24)]
    bundles = {k: make_bundle(k) for k in keys}
    for k in keys:
        assert a.put_artifact(k, bundles[k]).status == 201
    for k in keys:
        assert b.get(f"/v1/artifacts/{k}").body == bundles[k]
    masters = [p for p in cluster.ports if cluster.role(p) == "master"]
    assert all(int(cli(p, "DBSIZE")) > 0 for p in masters)
