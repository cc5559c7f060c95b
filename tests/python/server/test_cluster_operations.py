"""The Redis Cluster procedures of docs/operations.md "Running a Redis
Cluster", run for real on a loopback cluster (three masters, three
replicas) under kcache-server:

- backup and restore: BGSAVE on every master (`redis-cli --cluster call
  ... BGSAVE --cluster-only-masters`), the masters' dump.rdb files copied;
  the whole cluster thrown away; a new one built from the dumps (each new
  master starts alone on one dump and claims the slots it holds keys for,
  CLUSTER MEET, `redis-cli --cluster fix`, replicas added); every artifact
  stored before the backup reads back identical through a new
  kcache-server;
- rolling upgrade, replica first: for each shard, the replica is restarted
  (as with a new redis-server binary) and waits to catch up, `CLUSTER
  FAILOVER` on it makes it the master, then the old master (now a replica)
  is restarted. Two kcache-servers serve GETs and PUTs throughout: not one
  request fails, and the MOVED redirects of the three failovers are
  counted.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import threading
import time

import pytest

from cluster_harness import REDIS_CLI, RedisCluster, cli
from server_harness import REDIS, make_bundle, new_key, wait_until

pytestmark = pytest.mark.skipif(REDIS is None or REDIS_CLI is None, reason="redis-server / redis-cli not installed")


def store(srv, n: int, rng: random.Random) -> dict[str, bytes]:
    out = {}
    for i in range(n):
        key = new_key()
        bundle = make_bundle(key, payload=rng.randbytes(2_200_000 if i % 3 == 0 else 30_000))
        assert srv.put_artifact(key, bundle).status == 201
        out[key] = bundle
    return out


def test_backup_of_every_master_restores_into_a_new_cluster(start_server, tmp_path):
    old = RedisCluster(tmp_path / "old")
    try:
        srv = start_server(storage=old.url())
        stored = store(srv, 30, random.Random(1))
        masters = old.masters()
        assert all(int(cli(m, "DBSIZE")) > 0 for m in masters)
        # The backup: BGSAVE on every master, then each master's dump.rdb.
        since = {m: int(cli(m, "LASTSAVE")) for m in masters}
        call = subprocess.run([REDIS_CLI, "--cluster", "call", f"127.0.0.1:{masters[0]}", "BGSAVE",
                               "--cluster-only-masters"], capture_output=True, text=True, timeout=60)
        assert call.returncode == 0, call.stdout + call.stderr
        for m in masters:
            wait_until(lambda: "rdb_bgsave_in_progress:0" in cli(m, "INFO", "persistence")
                       and int(cli(m, "LASTSAVE")) >= since[m], 30, f"BGSAVE on {m} never finished")
            assert "rdb_last_bgsave_status:ok" in cli(m, "INFO", "persistence")
        backup = tmp_path / "backup"
        backup.mkdir()
        dumps = []
        for i, m in enumerate(masters):
            dumps.append(backup / f"master-{i}.rdb")
            shutil.copy(old.dirs[m] / "dump.rdb", dumps[-1])
        srv.stop()
    finally:
        old.stop()  # every node and its directory: only the dumps are left

    new = RedisCluster.restore(tmp_path / "new", dumps)
    try:
        new.wait_agreed()  # every slot covered, every node agreeing (raises otherwise)
        assert len(new.masters()) == 3 and len(new.ports) == 6
        srv = start_server(storage=new.url())
        for key, bundle in stored.items():
            r = srv.get(f"/v1/artifacts/{key}")
            assert r.status == 200 and r.body == bundle, (key, r.status, r.body[:200])
        # The index came back with its master: usage counts every entry.
        assert srv.get("/v1/stats").json()["storage"]["entries"] == len(stored)
        # And the restored cluster takes new uploads.
        assert len(store(srv, 3, random.Random(2))) == 3
    finally:
        new.stop()


def test_rolling_restart_replica_first_with_manual_failover_under_load(start_server, tmp_path):
    cluster = RedisCluster(tmp_path / "cluster")
    try:
        originals = cluster.masters()
        for m in originals:
            cluster.wait_synced(cluster.replica_of(m))
        servers = [start_server(storage=cluster.url(first)) for first in originals[:2]]
        stored = store(servers[0], 24, random.Random(3))
        lock = threading.Lock()
        stop = threading.Event()
        calls: list[tuple[str, int | str]] = []

        def load(i: int) -> None:
            rng = random.Random(10 + i)
            n = 0
            while not stop.is_set():
                n += 1
                srv = servers[n % 2]
                with lock:
                    key, want = rng.choice(list(stored.items()))
                try:
                    r = srv.get(f"/v1/artifacts/{key}", timeout=15)
                    ok = r.status == 200 and r.body == want
                    with lock:
                        calls.append(("get", r.status if ok else f"{r.status} {r.body[:120]!r}"))
                    if n % 3 == 0:
                        k = new_key()
                        b = make_bundle(k, payload=rng.randbytes(rng.choice([30_000, 1_500_000])))
                        r = srv.put_artifact(k, b)
                        with lock:
                            calls.append(("put", r.status if r.status == 201 else f"{r.status} {r.body[:120]!r}"))
                            if r.status == 201:
                                stored[k] = b
                except OSError as e:
                    with lock:
                        calls.append(("exception", repr(e)))

        threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        for m in originals:
            r = cluster.replica_of(m)
            cluster.restart_node(r)  # the replica first
            cluster.wait_synced(r)
            cluster.wait_seen_up(r)  # every node has seen it back: no CLUSTERDOWN once it takes the slots
            assert cli(r, "CLUSTER", "FAILOVER").strip() == "OK"
            wait_until(lambda: cluster.role(r) == "master" and cluster.role(m) == "slave", 30,
                       f"CLUSTER FAILOVER on {r} never completed")
            cluster.restart_node(m)  # then the old master, now a replica
            cluster.wait_synced(m)
            cluster.wait_seen_up(m)
        cluster.wait_ok()
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)

        bad = [c for c in calls if c[1] not in (200, 201)]
        assert not bad, f"{len(bad)} of {len(calls)} requests failed during the rolling restart: {bad[:5]}"
        assert sum(1 for c in calls if c[0] == "put") >= 3
        assert set(cluster.masters()).isdisjoint(originals), "every shard's master should have changed"
        moved = 0.0
        for srv in servers:
            for line in srv.get("/metrics").body.decode().splitlines():
                if line.startswith('kcache_redis_cluster_redirects_total{kind="moved"}'):
                    moved += float(line.split()[1])
        assert moved >= 3, moved
        for key, bundle in stored.items():
            r = servers[1].get(f"/v1/artifacts/{key}")
            assert r.status == 200 and r.body == bundle, key
    finally:
        cluster.stop()
