#!/usr/bin/env python3
"""Hits and uploads per second through kcache-server on one redis-server vs
a 3-master vs a 6-master Redis Cluster (loopback, no replicas), for 100 KB
and 4 MB artifacts, with the load generator's own ceilings beside them.

    KCACHE_SERVER_BIN=$PWD/build/dev/server/kcache-server .venv/bin/python \\
        bench/storage/cluster_throughput.py            # about 6 minutes
    .venv/bin/python bench/storage/cluster_throughput.py --from-json bench/storage/cluster_throughput.json

Writes bench/storage/cluster_throughput.json (every run), and from it
bench/storage/CLUSTER_THROUGHPUT.md and bench/storage/cluster_throughput.png.
--from-json only regenerates the report and the plot.

What runs (all on this machine, sharing its CPUs):
- storage: one redis-server; a 3-master and a 6-master cluster
  (tests/python/server/cluster_harness.py, random free ports, no
  persistence, no replicas: replication would only take CPU from the
  masters here), all started at once and kept for the whole run;
- one kcache-server per storage (`--threads 2`, no access log, pool=32 per
  Redis node; kcache's in-memory hot tier is off with Redis storage, so every
  hit reads Redis);
- load: wrk (bench/server's wrk wrapper, 2 threads) at 8 and 32 connections.
  GET: a stored key per request, cycling through 256 (100 KB) or 32 (4 MB)
  keys (bench/storage/get_many.lua), so reads spread over every master. PUT:
  a fresh bundle per request (bench/server/put.lua), the storage flushed
  after each PUT run;
- ceilings: wrk against kcache-server's /healthz (HTTP only, no storage), and
  against nginx serving the very same bundle bytes as static files (what
  wrk plus loopback can move at that size); redis-benchmark SET/GET of the
  same sizes against each storage (`--cluster` for the clusters): Redis's own
  rate, without kcache;
- CPU: the seconds of CPU each process used during each run (kcache-server,
  each Redis node, wrk), from /proc and getrusage, so the report can say
  where the two cores went;
- rounds: every storage in each round, the order rotated between rounds.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests/python/server"))

SIZES = [("100 KB", 100 * 1024), ("4 MB", 4 * 1024 * 1024)]
CONNS = [8, 32]
GET_KEYS = {100 * 1024: 256, 4 * 1024 * 1024: 32}
PUT_BUNDLES = {100 * 1024: 6000, 4 * 1024 * 1024: 240}  # more than a PUT run stores here (per wrk thread: half)
STORAGES = ["redis", "cluster3", "cluster6"]
LABEL = {"redis": "1 redis-server", "cluster3": "3-master cluster", "cluster6": "6-master cluster"}
COMMAND = ("KCACHE_SERVER_BIN=$PWD/build/dev/server/kcache-server .venv/bin/python "
           "bench/storage/cluster_throughput.py")
TICK = os.sysconf("SC_CLK_TCK")


def load_server_bench():
    # kcache (for its bundle writer) from the environment, before bench.py
    # puts this checkout's compile/ (maybe unbuilt) first on the path.
    import server_harness  # noqa: F401
    spec = importlib.util.spec_from_file_location("server_bench", REPO / "bench/server/bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads)."""
    try:
        f = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / TICK


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Storage:
    """One redis-server, or a cluster; what a kcache-server URL needs, the
    node pids for CPU accounting, and FLUSHALL on every master."""

    def __init__(self, kind: str, tmp: pathlib.Path, sb) -> None:
        from cluster_harness import RedisCluster, cli
        self.kind, self._cli, self.cluster, self.proc = kind, cli, None, None
        if kind == "redis":
            self.port = sb.free_port()
            d = tmp / "redis1"
            d.mkdir()
            self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                          "--save", "", "--appendonly", "no", "--dir", str(d)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            sb.wait_port(self.port)
            self.masters = [self.port]
            self.pids = {self.port: self.proc.pid}
            self.url = f"redis://127.0.0.1:{self.port}/0?pool=32&timeout_ms=5000"
        else:
            n = int(kind.removeprefix("cluster"))
            self.cluster = RedisCluster(tmp / kind, masters=n, replicas=0)
            self.masters = self.cluster.ports
            self.pids = {p: pr.pid for p, pr in self.cluster.procs.items()}
            self.url = self.cluster.url(query="?pool=32&timeout_ms=5000")

    def flush(self) -> None:
        for p in self.masters:
            self._cli(p, "FLUSHALL")

    def dbsizes(self) -> list[int]:
        return [int(self._cli(p, "DBSIZE").strip() or 0) for p in self.masters]

    def used_memory(self) -> int:
        """Redis's used_memory, summed over the masters."""
        total = 0
        for p in self.masters:
            for line in self._cli(p, "INFO", "memory").splitlines():
                if line.startswith("used_memory:"):
                    total += int(line.split(":")[1])
        return total

    def index_master(self) -> int:
        """The port of the master holding kcache's LRU index ({index})."""
        for p in self.masters:
            if self._cli(p, "EXISTS", "kcache:{index}:lru").strip() == "1":
                return p
        return -1

    def stop(self) -> None:
        if self.cluster:
            self.cluster.stop()
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)


def measured(fn, pids: dict[str, int]) -> tuple[dict, dict]:
    """Runs fn() (a wrk or redis-benchmark run); returns its result and the CPU
    seconds each named process, and the children (wrk), used meanwhile."""
    before = {k: proc_cpu(p) for k, p in pids.items()}
    c0, t0 = children_cpu(), time.monotonic()
    r = fn()
    wall = time.monotonic() - t0
    cpu = {k: round(proc_cpu(p) - before[k], 3) for k, p in pids.items()}
    cpu["load_generator"] = round(children_cpu() - c0, 3)
    cpu["wall_s"] = round(wall, 3)
    cpu["load1_after"] = os.getloadavg()[0]  # other work on the machine shows here
    return r, cpu


def redis_benchmark(storage: Storage, size: int, conns: int) -> dict:
    n = {100 * 1024: 20000, 4 * 1024 * 1024: 400}[size]
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(storage.masters[0]), "-t", "set,get", "-d", str(size),
           "-c", str(conns), "-n", str(n), "-P", "1", "--csv"]  # no -r: every GET reads the key SET wrote
    if storage.cluster:
        cmd.insert(1, "--cluster")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    res = {}
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] in ("SET", "GET"):
            res[cells[0]] = {"rps": float(cells[1]), "p50_us": float(cells[4]) * 1000,
                             "p99_us": float(cells[6]) * 1000}
    return res


def run(a) -> dict:
    sb = load_server_bench()
    started = time.monotonic()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kcache-cluster-tp-"))
    storages: dict[str, Storage] = {}
    servers = {}
    nginx = None
    out = {"runs": [], "ceilings": [], "redis_benchmark": [], "spread": {}}
    try:
        for kind in STORAGES:
            storages[kind] = Storage(kind, tmp, sb)
            servers[kind] = sb.Kcache(a.server_bin, storages[kind].url, tmp / f"{kind}.log", a.threads)
        # GET sets: bundle files (nginx serves them too) and key lists.
        www = tmp / "www" / "v1" / "artifacts"
        www.mkdir(parents=True)
        get_sets = {}
        for _, size in SIZES:
            keys = [secrets.token_hex(32) for _ in range(GET_KEYS[size])]
            for k in keys:
                (www / k).write_bytes(sb.bundle(k, size))
            index = tmp / f"get-{size}.keys"
            index.write_text("\n".join(keys) + "\n")
            get_sets[size] = (keys, index)
        put_sets = {}
        for _, size in SIZES:
            d = tmp / f"put-{size}"
            d.mkdir()
            keys = []
            for _ in range(PUT_BUNDLES[size]):
                k = secrets.token_hex(32)
                (d / k).write_bytes(sb.bundle(k, size))
                keys.append(k)
            (d / "index").write_text("\n".join(keys) + "\n")
            put_sets[size] = d
        nport = sb.free_port()
        nginx = sb.nginx_start(tmp, tmp / "www", nport, a.threads)
        print(f"set up in {time.monotonic() - started:.0f} s", flush=True)

        def pids_of(kind: str) -> dict[str, int]:
            p = {"kcache_server": servers[kind].proc.pid}
            p.update({f"redis:{port}": pid for port, pid in storages[kind].pids.items()})
            return p

        def preload(kind: str) -> dict:
            """Stores the GET sets; returns Redis's memory growth per size."""
            storages[kind].flush()
            mem = {}
            for _, size in SIZES:
                before, stored = storages[kind].used_memory(), 0
                for k in get_sets[size][0]:
                    data = (www / k).read_bytes()
                    servers[kind].put(k, data)
                    stored += len(data)
                mem[str(size)] = {"bundles": len(get_sets[size][0]), "bundle_bytes": stored,
                                  "used_memory_growth": storages[kind].used_memory() - before}
            return mem

        for rnd in range(a.rounds):
            order = STORAGES[rnd % 3:] + STORAGES[:rnd % 3]
            # Ceilings, once per round: wrk against /healthz, and against nginx.
            for c in CONNS:
                r, cpu = measured(lambda: sb.wrk(f"http://127.0.0.1:{servers['redis'].port}/healthz", c, a.seconds,
                                                 sb.HERE / "get.lua"), {"kcache_server": servers["redis"].proc.pid})
                out["ceilings"].append({"round": rnd, "target": "kcache /healthz", "size": 0, "conns": c, **r,
                                        "cpu": cpu})
                print(f"ceiling /healthz c={c} {r['rps']:,.0f}/s", flush=True)
                for name, size in SIZES:
                    r, cpu = measured(lambda: sb.wrk(f"http://127.0.0.1:{nport}/", c, a.seconds, HERE / "get_many.lua",
                                                     [str(get_sets[size][1])]), {"nginx": nginx.pid})
                    out["ceilings"].append({"round": rnd, "target": "nginx, same bytes", "size": size, "conns": c,
                                            **r, "cpu": cpu})
                    print(f"ceiling nginx {name} c={c} {r['rps']:,.0f}/s", flush=True)
            for kind in order:
                srv, pids = servers[kind], pids_of(kind)
                mem = preload(kind)
                if rnd == 0:
                    out["spread"][kind] = {"keys_per_master": storages[kind].dbsizes(),
                                           "index_master": storages[kind].index_master(), "memory": mem}
                for name, size in SIZES:
                    for c in CONNS:
                        r, cpu = measured(lambda: sb.wrk(f"http://127.0.0.1:{srv.port}/", c, a.seconds,
                                                         HERE / "get_many.lua", [str(get_sets[size][1])]), pids)
                        out["runs"].append({"round": rnd, "storage": kind, "op": "get", "size": size, "conns": c,
                                            **r, "cpu": cpu})
                        print(f"{kind:9} GET {name:6} c={c:<3} {r['rps']:>8,.0f}/s p99 {r['p99_us'] / 1000:.1f} ms "
                              f"errors {r['errors']} non2xx {r['non2xx']}", flush=True)
                for name, size in SIZES:
                    for c in CONNS:
                        secs = a.put_seconds * (2 if size >= 4 << 20 else 1)
                        storages[kind].flush()
                        r, cpu = measured(lambda: sb.wrk(f"http://127.0.0.1:{srv.port}/", c, secs,
                                                         sb.HERE / "put.lua", [str(put_sets[size])]), pids)
                        r["stored_per_s"] = r["stored"] / (r["duration_us"] / 1e6)
                        out["runs"].append({"round": rnd, "storage": kind, "op": "put", "size": size, "conns": c,
                                            **r, "cpu": cpu})
                        print(f"{kind:9} PUT {name:6} c={c:<3} {r['stored_per_s']:>8,.0f} stored/s "
                              f"p99 {r['p99_us'] / 1000:.1f} ms repeats {r['repeats']} errors {r['errors']} "
                              f"non2xx {r['non2xx']}", flush=True)
                storages[kind].flush()
        # Redis itself, without kcache: once, at the end.
        for kind in STORAGES:
            for name, size in SIZES:
                r, cpu = measured(lambda: redis_benchmark(storages[kind], size, 32),
                                  {f"redis:{p}": pid for p, pid in storages[kind].pids.items()})
                out["redis_benchmark"].append({"storage": kind, "size": size, "conns": 32, **r, "cpu": cpu})
                storages[kind].flush()
                print(f"redis-benchmark {kind} {name} SET {r['SET']['rps']:,.0f} GET {r['GET']['rps']:,.0f}",
                      flush=True)
    finally:
        for s in servers.values():
            s.stop()
        for s in storages.values():
            s.stop()
        if nginx:
            nginx.terminate()
            nginx.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    out["meta"] = {
        "command": COMMAND, "when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(),
        "redis": subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip(),
        "wrk": "wrk 2 threads (1 at one connection)", "server_threads": a.threads, "rounds": a.rounds,
        "get_seconds": a.seconds, "put_seconds": a.put_seconds, "server_bin": a.server_bin,
        "elapsed_s": round(time.monotonic() - started, 1), "load_before": os.getloadavg(),
    }
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summarize(res: dict) -> dict:
    """Medians over rounds: (storage, op, size, conns) -> figures."""
    groups: dict[tuple, list[dict]] = {}
    for r in res["runs"]:
        groups.setdefault((r["storage"], r["op"], r["size"], r["conns"]), []).append(r)
    out = {}
    for k, rs in groups.items():
        rate = [(x["stored_per_s"] if x["op"] == "put" else x["rps"]) for x in rs]
        cpu = {}
        for x in rs:
            for name, v in x["cpu"].items():
                cpu.setdefault(name, []).append(v / x["cpu"]["wall_s"] if name not in ("wall_s", "load1_after") else v)
        redis_cores = [sum(v / x["cpu"]["wall_s"] for n, v in x["cpu"].items() if n.startswith("redis:"))
                       for x in rs]
        busiest = [max((v / x["cpu"]["wall_s"] for n, v in x["cpu"].items() if n.startswith("redis:")), default=0)
                   for x in rs]
        out[k] = {
            "rate": med(rate), "rates": [round(v, 1) for v in rate],
            "mb_s": med([v * k[2] / 1e6 for v in rate]),
            "p50_ms": med([x["p50_us"] / 1000 for x in rs]), "p99_ms": med([x["p99_us"] / 1000 for x in rs]),
            "errors": sum(x["errors"] + x["non2xx"] for x in rs),
            "repeats": sum(x.get("repeats", 0) for x in rs),
            "server_cores": med(cpu.get("kcache_server", [])), "redis_cores": med(redis_cores),
            "busiest_redis_core": med(busiest), "wrk_cores": med(cpu.get("load_generator", [])),
            "load1": max(cpu.get("load1_after", [0])),
        }
    return out


def ceilings(res: dict) -> dict:
    groups: dict[tuple, list[float]] = {}
    for r in res["ceilings"]:
        groups.setdefault((r["target"], r["size"], r["conns"]), []).append(r["rps"])
    return {k: med(v) for k, v in groups.items()}


def fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def _rate_row(name: str, c: int, kind: str, x: dict, extra: list) -> str:
    """One table row of a measured storage: rate, bytes, latency, cores,
    errors, then `extra` columns, load and each round's rate."""
    cells = [name, c, LABEL[kind], fmt(x["rate"]), fmt(x["mb_s"]), f"{x['p50_ms']:.2f} / {x['p99_ms']:.2f}",
             f"{x['server_cores']:.2f}", fmt(x["rate"] / max(x["server_cores"], 1e-9)),
             f"{x['redis_cores']:.2f} ({x['busiest_redis_core']:.2f})", f"{x['wrk_cores']:.2f}", x["errors"],
             *extra, f"{x['load1']:.1f}", ", ".join(fmt(v) for v in x["rates"])]
    return "| " + " | ".join(str(v) for v in cells) + " |"


def report(res: dict, plot_name: str) -> str:
    m, s, ceil = res["meta"], summarize(res), ceilings(res)
    used = [x["server_cores"] + x["redis_cores"] + x["wrk_cores"] for x in s.values()] or [0.0]
    max_load = max([x["load1"] for x in s.values()] + [0.0])
    lines = [
        "# kcache-server on one redis-server vs a 3- and a 6-master Redis Cluster",
        "",
        f"Generated from `cluster_throughput.json` by `bench/storage/cluster_throughput.py` (run `{m['command']}`, "
        f"{m['when']}, {m['cpus']} CPUs, Linux {m['kernel']}, {m['redis'].split(' sha=')[0]}, the whole run "
        f"{m['elapsed_s']:.0f} s). Median of {m['rounds']} rounds; every storage in each round, order rotated. "
        f"kcache-server `--threads {m['server_threads']}`, no access log, `pool=32` per Redis node, a RelWithDebInfo "
        "(-O2) build. Clusters on loopback without replicas, no persistence. Load: "
        f"{m['wrk']}, {m['get_seconds']:g} s per GET run, {m['put_seconds']:g} s per PUT run "
        "(twice that at 4 MB). GETs cycle through 256 (100 KB) or 32 (4 MB) stored keys, so they spread over "
        "every master; PUTs send a fresh bundle each.",
        "",
        "**This machine cannot show a cluster scaling.** Load generator, kcache-server and every Redis node share "
        f"the same {m['cpus']} CPUs, so more masters only add processes and round trips on the same cores; "
        "scaling needs masters (and kcache-servers) on machines of their own. "
        f"Summed over wrk, kcache-server and the Redis nodes, this benchmark's processes used "
        f"{min(used):.2f}-{max(used):.2f} of the {m['cpus']} cores during its runs, and the 1-minute load average "
        f"reached {max_load:.1f}" + (" (above the core count: other work on the machine — other builds and tests — "
                                    "took the rest, and the rates below are lower and noisier than on an idle "
                                    "machine)" if max_load > m['cpus'] else "") + ". "
        "What the numbers do show: what one kcache-server costs per hit and per upload on each storage in "
        "CPU (the 'per kcache core' columns divide the rate by the CPU the server used, which other load "
        "distorts less than the rate itself), how the work splits between kcache and Redis, and whether the "
        "cluster routing costs more per request than one redis-server.",
        "",
        f"![hits and uploads per second]({plot_name})",
        "",
        "## Hits (GET of a stored key)",
        "",
        "Rate: answers per second (all 200). MB/s: artifact bytes served. Cores: CPU-seconds per second during "
        "the run (kcache-server; all Redis nodes together, and the busiest one; wrk). Load: the highest 1-minute "
        "load average seen at the end of the rounds' runs (above 2, other work was competing for the CPUs). "
        "Rounds: each round's rate. Rate, p50 and p99 are each the median over the rounds, so with two rounds "
        "a row's p50 and p99 can come from different rounds.",
        "",
        "| size | conns | storage | hits/s | MB/s | p50 / p99 ms | kcache cores | hits/s per kcache core | "
        "Redis cores (busiest node) | wrk cores | errors | load | rounds |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, size in SIZES:
        for c in CONNS:
            for kind in STORAGES:
                x = s.get((kind, "get", size, c))
                if not x:
                    continue
                lines.append(_rate_row(name, c, kind, x, []))
            for target in ("nginx, same bytes",):
                v = ceil.get((target, size, c))
                if v:
                    lines.append(f"| {name} | {c} | *ceiling: wrk → {target}* | {fmt(v)} | {fmt(v * size / 1e6)} "
                                 "| | | | | | | | |")
    lines += [
        "",
        "## Uploads (PUT of a fresh bundle)",
        "",
        "Rate: 201 answers per second (new artifacts landed). `repeats`: 200 answers to a bundle sent twice (a wrk "
        "thread ran out of fresh bundles; none expected).",
        "",
        "| size | conns | storage | uploads/s | MB/s | p50 / p99 ms | kcache cores | uploads/s per kcache core | "
        "Redis cores (busiest node) | wrk cores | errors | repeats | load | rounds |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, size in SIZES:
        for c in CONNS:
            for kind in STORAGES:
                x = s.get((kind, "put", size, c))
                if not x:
                    continue
                lines.append(_rate_row(name, c, kind, x, [x["repeats"]]))
    lines += ["", "## Ceilings", "",
              "The load generator against endpoints that do no storage work, in the same rounds.", "",
              "| target | size | conns | req/s | MB/s |", "| --- | --- | ---: | ---: | ---: |"]
    for (target, size, c), v in sorted(ceil.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        sz = next((n for n, z in SIZES if z == size), "tiny JSON")
        lines.append(f"| wrk → {target} | {sz} | {c} | {fmt(v)} | {fmt(v * size / 1e6) if size else ''} |")
    lines += ["", "redis-benchmark (`-P 1 -c 32`, `--cluster` for the clusters; each GET reads the key the SETs wrote) against the same storage, "
              "without kcache: Redis's own rate for these sizes on this machine.", "",
              "| storage | size | SET/s | GET/s | SET MB/s | GET MB/s |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in res["redis_benchmark"]:
        sz = next(n for n, z in SIZES if z == r["size"])
        if "SET" in r and "GET" in r:
            lines.append(f"| {LABEL[r['storage']]} | {sz} | {fmt(r['SET']['rps'])} | {fmt(r['GET']['rps'])} | "
                         f"{fmt(r['SET']['rps'] * r['size'] / 1e6)} | {fmt(r['GET']['rps'] * r['size'] / 1e6)} |")
    lines += ["", "## Where the keys went", "",
              "Keys per master after the GET preload (each entry is a meta hash and its chunks of 1 MiB − 64 bytes, all in its "
              "slot; the LRU index's three keys sit on one master, which every hit and every upload also touches).",
              "", "| storage | keys per master | index on |", "| --- | --- | --- |"]
    for kind, sp in res["spread"].items():
        lines.append(f"| {LABEL[kind]} | {', '.join(str(n) for n in sp['keys_per_master'])} | "
                     f"port {sp['index_master']} |")
    lines += ["", "Redis memory per artifact byte: growth of `used_memory` (summed over the masters) while the GET "
              "set was stored, over the bundle bytes stored (the index's few bytes per entry included).", "",
              "| storage | size | bundles | bundle MB | used_memory growth MB | ratio |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for kind, sp in res["spread"].items():
        for name, size in SIZES:
            x = sp.get("memory", {}).get(str(size))
            if x:
                lines.append(f"| {LABEL[kind]} | {name} | {x['bundles']} | {x['bundle_bytes'] / 1e6:.1f} | "
                             f"{x['used_memory_growth'] / 1e6:.1f} | "
                             f"{x['used_memory_growth'] / x['bundle_bytes']:.3f} |")
    return "\n".join(lines) + "\n"


def plot(res: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    s, ceil = summarize(res), ceilings(res)
    fig, axes = plt.subplots(1, 4, figsize=(16, 4.2))
    colors = {"redis": "#4c72b0", "cluster3": "#dd8452", "cluster6": "#55a868"}
    for ax, (op, (name, size)) in zip(axes, [(op, sz) for op in ("get", "put") for sz in SIZES]):
        width = 0.25
        for i, kind in enumerate(STORAGES):
            vals = [s.get((kind, op, size, c), {}).get("rate", 0) for c in CONNS]
            ax.bar([j + (i - 1) * width for j in range(len(CONNS))], vals, width, label=LABEL[kind],
                   color=colors[kind])
        if op == "get":
            for j, c in enumerate(CONNS):
                v = ceil.get(("nginx, same bytes", size, c))
                if v:
                    ax.plot([j - 1.5 * width, j + 1.5 * width], [v, v], "k--", lw=1)
                    ax.annotate(f"nginx {fmt(v)}", (j, v), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(CONNS)), [f"{c} conns" for c in CONNS])
        ax.set_title(f"{'hits' if op == 'get' else 'uploads'}/s, {name}")
        ax.set_ylim(0, max([ax.get_ylim()[1]] + [ceil.get(("nginx, same bytes", size, c), 0) * 1.15
                                                  for c in CONNS if op == "get"]))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
    fig.suptitle(f"kcache-server on Redis: one server vs 3 and 6 cluster masters "
                 f"({res['meta']['cpus']} shared CPUs: no scaling can show here; dashed: wrk against nginx "
                 "serving the same bytes)", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin", default=os.environ.get("KCACHE_SERVER_BIN",
                                                           str(REPO / "build/dev/server/kcache-server")))
    ap.add_argument("--seconds", type=float, default=4.0, help="wrk duration of each GET run")
    ap.add_argument("--put-seconds", type=float, default=3.0, help="of each 100 KB PUT run (4 MB: twice)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="kcache-server I/O threads, nginx workers")
    ap.add_argument("--json", default=str(HERE / "cluster_throughput.json"))
    ap.add_argument("--report", default=str(HERE / "CLUSTER_THROUGHPUT.md"))
    ap.add_argument("--plot", default=str(HERE / "cluster_throughput.png"))
    ap.add_argument("--from-json", default=None, help="only regenerate the report and plot from this json")
    a = ap.parse_args()
    if a.from_json:
        res = json.loads(pathlib.Path(a.from_json).read_text())
    else:
        for tool in ("wrk", "nginx", "redis-server", "redis-cli", "redis-benchmark"):
            if not shutil.which(tool):
                print(f"{tool} not found (Debian: apt-get install -y wrk nginx-light redis-server)", file=sys.stderr)
                return 2
        if not pathlib.Path(a.server_bin).exists():
            print(f"no kcache-server at {a.server_bin}", file=sys.stderr)
            return 2
        res = run(a)
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    plot(res, pathlib.Path(a.plot))
    pathlib.Path(a.report).write_text(report(res, pathlib.Path(a.plot).name))
    print(f"wrote {a.report} and {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
