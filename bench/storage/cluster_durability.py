"""PUT latency through kcache-server on a 3-master/3-replica loopback Redis
Cluster, with and without the durability setting (wait_replicas=1).

One client, sequential uploads of new keys (no other load), for 100 KB and
1 MB bundles, alternating between two kcache-servers on the same cluster, one
without the setting and one with it, so both see the same machine load; two
rounds, each on a fresh cluster. Writes the raw
per-upload latencies' summary as JSON (stdout, and the path given).

    KCACHE_BUILD_DIR=$PWD/build/dev .venv/bin/python bench/storage/cluster_durability.py \
        bench/storage/cluster_durability.json

Uses the test harness (tests/python/server) for the cluster and the server.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import secrets
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/python/server"))
if "KCACHE_BUILD_DIR" in os.environ and "KCACHE_SERVER_BIN" not in os.environ:
    os.environ["KCACHE_SERVER_BIN"] = os.environ["KCACHE_BUILD_DIR"] + "/server/kcache-server"

import server_harness  # noqa: E402
from server_harness import KcacheServer, make_bundle, new_key  # noqa: E402
from cluster_harness import RedisCluster, cli  # noqa: E402

UPLOADS = 200  # per mode and size
ROUNDS = 2  # each on a fresh cluster
SIZES = [100_000, 1_000_000]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p))], 3)


def measure(tmp: pathlib.Path) -> list[dict]:
    """One cluster, two servers on it (async, durable); uploads alternate
    between them, so both see the same machine load."""
    cluster = RedisCluster(tmp / "cluster")
    servers = {}
    try:
        # A new cluster's replicas do their first sync after `--cluster create`:
        # WAIT counts only replicas online, so wait for them.
        deadline = time.monotonic() + 30
        while not all("state=online" in cli(p, "INFO", "replication")
                      for p in cluster.ports if cluster.role(p) == "master"):
            assert time.monotonic() < deadline, "replicas never came online"
            time.sleep(0.05)
        base = "redis-cluster://" + ",".join(f"127.0.0.1:{p}" for p in cluster.ports) + "/"
        servers[False] = KcacheServer(tmp, storage=base + "?connect_timeout_ms=500&timeout_ms=2000")
        servers[True] = KcacheServer(
            tmp, storage=base + "?connect_timeout_ms=500&timeout_ms=2000&wait_replicas=1&wait_timeout_ms=1000")
        out = []
        for size in SIZES:
            ms = {False: [], True: []}
            for i in range(2 * UPLOADS):
                durable = bool(i % 2)
                k = new_key()
                b = make_bundle(k, payload=secrets.token_bytes(size))
                t0 = time.perf_counter()
                r = servers[durable].put_artifact(k, b)
                took = (time.perf_counter() - t0) * 1000
                assert r.status == 201, (r.status, r.body[:300])
                if i >= 20:  # the first ten of each warm the connection pools
                    ms[durable].append(took)
            for durable in (False, True):
                xs = ms[durable]
                out.append({"durable": durable, "bundle_bytes": len(b), "uploads": len(xs),
                            "p50_ms": pct(xs, 0.5), "p90_ms": pct(xs, 0.9), "p99_ms": pct(xs, 0.99),
                            "mean_ms": round(statistics.fmean(xs), 3)})
        return out
    finally:
        for srv in servers.values():
            srv.stop()
        cluster.stop()


def main() -> None:
    if not server_harness.SERVER_BIN.exists():
        sys.exit(f"no kcache-server at {server_harness.SERVER_BIN}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(ROUNDS):
            rows += measure(pathlib.Path(d) / f"round{len(rows)}")
    result = {"command": "KCACHE_BUILD_DIR=$PWD/build/dev .venv/bin/python bench/storage/cluster_durability.py "
                         "bench/storage/cluster_durability.json",
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
              "cpus": os.cpu_count(), "cluster": "3 masters + 3 replicas, loopback, redis-server 7",
              "client": "one thread, sequential PUTs of new keys, alternating between an async and a durable kcache-server on the same cluster", "rows": rows}
    text = json.dumps(result, indent=2)
    print(text)
    if len(sys.argv) > 1:
        pathlib.Path(sys.argv[1]).write_text(text + "\n")


if __name__ == "__main__":
    main()
