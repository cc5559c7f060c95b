"""A Redis Cluster answering CLUSTERDOWN for a passing moment: kcache-server
retries for its call budget (connect + operation timeout), not for 5 short
backoff rounds (about 0.3 s), so a GET made while the cluster is down for a
second answers 200 once it is up again.

The down moment is made for real: three masters, no replicas, a short node
timeout; one master is stopped (SIGSTOP) until the others flag it FAIL, which
turns their cluster_state to fail (a slot served by a failed master), then
resumed. The others clear the flag only two node timeouts after they set it
(a master with slots: Redis waits for a failover that could still come), and
answer CLUSTERDOWN for every slot until then — also for the slots they serve
themselves, which is where the GET goes.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from cluster_harness import REDIS_CLI, RedisCluster, cli, key_slot, meta_key
from server_harness import REDIS, make_bundle, new_key, wait_until

pytestmark = pytest.mark.skipif(REDIS is None or REDIS_CLI is None, reason="redis-server / redis-cli not installed")

NODE_TIMEOUT_MS = 700


def cluster_counts(srv) -> dict[str, float]:
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in srv.get("/metrics").body.decode().splitlines()
            if line.startswith("kcache_redis_cluster_")}


def wait_state(port: int, state: str, limit: float) -> None:
    wait_until(lambda: f"cluster_state:{state}" in cli(port, "CLUSTER", "INFO"), limit,
               f"node {port} never reached cluster_state:{state}", interval=0.01)


def test_a_get_made_while_the_cluster_is_down_for_a_moment_answers_once_it_is_up(start_server, tmp_path):
    cluster = RedisCluster(tmp_path / "cluster", replicas=0, node_timeout_ms=NODE_TIMEOUT_MS)
    try:
        masters = cluster.masters()
        # A key served by the first master; the last one is stopped.
        serving, stopped = masters[0], masters[-1]
        key = new_key()
        while cluster.owner(key_slot(meta_key(key))) != serving:
            key = new_key()
        srv = start_server(storage=cluster.url(serving))
        bundle = make_bundle(key, payload=os.urandom(50_000))
        assert srv.put_artifact(key, bundle).status == 201
        before = cluster_counts(srv)

        os.kill(cluster.procs[stopped].pid, signal.SIGSTOP)
        try:
            wait_state(serving, "fail", 30)  # positive control: the cluster is down
        finally:
            os.kill(cluster.procs[stopped].pid, signal.SIGCONT)
        assert "CLUSTERDOWN" in cli(serving, "GET", meta_key(key))
        t0 = time.monotonic()
        r = srv.get(f"/v1/artifacts/{key}", timeout=30)
        took = time.monotonic() - t0
        after = cluster_counts(srv)
        assert r.status == 200 and r.body == bundle, (r.status, r.body[:200], took)
        retried = (after['kcache_redis_cluster_retries_total{reason="clusterdown"}']
                   - before['kcache_redis_cluster_retries_total{reason="clusterdown"}'])
        print(f"\nGET during CLUSTERDOWN: {r.status} after {took:.2f} s, {retried:.0f} clusterdown retries")
        assert retried >= 1, (before, after)  # it did meet CLUSTERDOWN, and rode it out
        assert after["kcache_redis_cluster_failed_calls_total"] == before["kcache_redis_cluster_failed_calls_total"]
        wait_state(serving, "ok", 30)
    finally:
        cluster.stop()
