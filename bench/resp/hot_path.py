#!/usr/bin/env python3
"""The hot paths after issue 19's RESP rewrite, against their references in
one run, alternating rounds so that a busy moment of a shared machine hits
both sides of a ratio alike:

- RESP: unpipelined GETs (`redis-benchmark -t get -P 1 -c 32`) of one
  stored value of 100 B, 1 KB and 10 KB from kcache-server's RESP endpoint
  (memory: and disk: storage) and from redis-server (no persistence).
  Target (issue 19): 0.8x of Redis's rate.
- HTTP: 100 KB hot hits (`wrk -c 32`, one key, the hot tier) from
  kcache-server on disk storage and from nginx serving the same bytes as a
  file (sendfile on). Target (founding target, issue 19; docs/STATUS.md): 1.2x of nginx's rate.

Reported, not gated. Writes hot_path.json (every raw result) and
HOT_PATH.md beside this file.

    .venv/bin/python bench/resp/hot_path.py --server-bin build/release/server/kcache-server
    .venv/bin/python bench/resp/hot_path.py --report     # HOT_PATH.md from hot_path.json
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import pathlib
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
import kcache._core  # noqa: E402,F401  the installed module, before bench.py puts compile/ first

sys.path.insert(0, str(REPO / "bench" / "server"))
import bench as server_bench  # noqa: E402  (wrk, nginx, the bundle writer, Kcache)

RESP_SIZES = [100, 1000, 10_000]
TARGET_RESP, TARGET_HTTP = 0.8, 1.2
ANALYSIS = "## Analysis (written by hand"


def redis_get(port: int, size: int, n: int, conns: int = 32) -> dict:
    """One stored value of `size` bytes under redis-benchmark's default key,
    then n unpipelined GETs of it."""
    base = ["redis-benchmark", "-p", str(port), "-c", str(conns), "-d", str(size), "-P", "1", "--csv"]
    subprocess.run(base + ["-t", "set", "-n", "1000"], capture_output=True, check=True, timeout=120)
    out = subprocess.run(base + ["-t", "get", "-n", str(n)], capture_output=True, text=True, check=True,
                         timeout=300).stdout
    row = next(r for r in csv.DictReader(io.StringIO(out)) if r["test"] == "GET")
    return {"rps": float(row["rps"]), "p50_ms": float(row["p50_latency_ms"]), "p99_ms": float(row["p99_latency_ms"]),
            "raw": row}


def start_redis(work: pathlib.Path) -> tuple[subprocess.Popen, int]:
    port = server_bench.free_port()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", str(work)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    server_bench.wait_port(port)
    return p, port


class KcacheResp(server_bench.Kcache):
    """kcache-server with both endpoints: .port (HTTP) and .resp_port."""

    def __init__(self, binary: str, storage: str, log: pathlib.Path, threads: int):
        super().__init__(binary, storage, log, threads, ["--resp-listen", "127.0.0.1:0"])
        line = self.proc.stdout.readline().decode()
        if not line.startswith("resp listening on"):
            raise RuntimeError(f"no RESP endpoint: {line!r}")
        self.resp_port = int(line.rsplit(":", 1)[1])


def run(a) -> dict:
    for tool in ("wrk", "nginx", "redis-server", "redis-benchmark"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found (Debian: apt-get install -y wrk nginx-light redis-server)")
    work = pathlib.Path(tempfile.mkdtemp(prefix="kcache-hotpath-"))
    procs, servers = [], []
    res = {"meta": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpus": os.cpu_count(),
                    "machine": platform.machine(), "kernel": platform.release(), "rounds": a.rounds,
                    "resp_gets_per_run": a.resp_n, "wrk_seconds": a.seconds, "threads": a.threads,
                    "server_bin": os.path.relpath(a.server_bin, REPO), "load_avg_start": os.getloadavg(),
                    "git": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                          capture_output=True, text=True).stdout.strip()},
           "resp": [], "http": []}
    t0 = time.monotonic()
    try:
        redis, rport = start_redis(work)
        procs.append(redis)
        mem = KcacheResp(a.server_bin, "memory:", work / "mem.log", a.threads)
        disk = KcacheResp(a.server_bin, f"disk:{work / 'disk'}", work / "disk.log", a.threads)
        servers += [mem, disk]
        # HTTP: one 100 KB bundle, on kcache (disk) and as nginx's file.
        key = secrets.token_hex(32)
        data = server_bench.bundle(key, 100 * 1024)
        www = work / "www" / "v1" / "artifacts"
        www.mkdir(parents=True)
        (www / key).write_bytes(data)
        disk.put(key, data)
        nport = server_bench.free_port()
        procs.append(server_bench.nginx_start(work, work / "www", nport, a.threads))
        get_lua = server_bench.HERE / "get.lua"
        targets = {"redis-server": rport, "kcache memory": mem.resp_port, "kcache disk": disk.resp_port}
        for size in RESP_SIZES:  # warm-up: each target's first run of each size is not counted
            for port in targets.values():
                redis_get(port, size, 2000)
        for url in (f"http://127.0.0.1:{nport}/v1/artifacts/{key}", f"http://127.0.0.1:{disk.port}/v1/artifacts/{key}"):
            server_bench.wrk(url, 8, 1, get_lua)
        for rnd in range(1, a.rounds + 1):
            for size in RESP_SIZES:
                row = {"round": rnd, "size": size, "load_avg": os.getloadavg()[0]}
                for name, port in targets.items():
                    row[name] = redis_get(port, size, a.resp_n)
                res["resp"].append(row)
                print(f"round {rnd} RESP GET {size:>6} B: " + ", ".join(
                    f"{n} {row[n]['rps']:,.0f}/s" for n in targets), flush=True)
            row = {"round": rnd, "load_avg": os.getloadavg()[0]}
            for name, port in (("nginx", nport), ("kcache disk", disk.port)):
                row[name] = server_bench.wrk(f"http://127.0.0.1:{port}/v1/artifacts/{key}", 32, a.seconds, get_lua)
            res["http"].append(row)
            print(f"round {rnd} HTTP 100 KB: nginx {row['nginx']['rps']:,.0f}/s, kcache disk "
                  f"{row['kcache disk']['rps']:,.0f}/s", flush=True)
    finally:
        for s in servers:
            s.stop()
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
    res["meta"]["elapsed_s"] = round(time.monotonic() - t0, 1)
    res["meta"]["load_avg_end"] = os.getloadavg()
    return res


def report(res: dict) -> str:
    m = res["meta"]
    L = ["# Hot paths after the RESP rewrite (issue 19)", "",
         f"Generated by `bench/resp/hot_path.py` from `hot_path.json` (run {m['date']}, {m['elapsed_s']:.0f} s; "
         f"{m['machine']}, {m['cpus']} CPUs, Linux {m['kernel']}). **The machine is shared**: 2 cores for the "
         "load generators, the servers and other sessions' work at the same time (load average "
         f"{m['load_avg_start'][0]:.1f} at the start, {m['load_avg_end'][0]:.1f} at the end; per round below). "
         f"So every ratio comes from {m['rounds']} alternating rounds (each round runs every target back to back) "
         "and the median is the figure; single rounds swing. Reported, not gated.", "",
         f"kcache-server `{m['server_bin']}` (a CMake `Release` build of {m.get('git', '?')}) with `--threads "
         f"{m['threads']}`, no access log; redis-server without persistence; nginx with `worker_processes "
         f"{m['threads']}`, `sendfile on`, no access log.", "",
         "## RESP: unpipelined GET of one stored value", "",
         f"`redis-benchmark -t get -P 1 -c 32 -n {m['resp_gets_per_run']}` (after a `SET` of the value and a "
         "warm-up run). Since 00b8417 kcache answers a value read before from its hot tier on the connection's "
         f"strand (server/resp/resp_hot.hpp); before, every GET hopped to its blocking pool and back. Target: **{TARGET_RESP}x** of redis-server's rate "
         "(before the rewrite, bench/resp/REPORT.md of 2026-11-30: 0.39x at 100 B, 0.48x at 10 KB, memory storage).", "",
         "| value | redis-server req/s | kcache memory req/s | ÷ redis | kcache disk req/s | ÷ redis | p50 ms redis / memory / disk | p99 ms redis / memory / disk | target met (memory / disk) |",
         "|---|---:|---:|---:|---:|---:|---|---|---|"]
    for size in RESP_SIZES:
        rows = [r for r in res["resp"] if r["size"] == size]
        med = {n: statistics.median(r[n]["rps"] for r in rows) for n in ("redis-server", "kcache memory", "kcache disk")}
        ratio_m = statistics.median(r["kcache memory"]["rps"] / r["redis-server"]["rps"] for r in rows)
        ratio_d = statistics.median(r["kcache disk"]["rps"] / r["redis-server"]["rps"] for r in rows)
        p50 = " / ".join(f"{statistics.median(r[n]['p50_ms'] for r in rows):.2f}" for n in med)
        p99 = " / ".join(f"{statistics.median(r[n]['p99_ms'] for r in rows):.2f}" for n in med)
        label = f"{size} B" if size < 1000 else f"{size // 1000} KB"
        L.append(f"| {label} | {med['redis-server']:,.0f} | {med['kcache memory']:,.0f} | **{ratio_m:.2f}x** | "
                 f"{med['kcache disk']:,.0f} | **{ratio_d:.2f}x** | {p50} | {p99} | "
                 f"{'yes' if ratio_m >= TARGET_RESP else 'no'} / {'yes' if ratio_d >= TARGET_RESP else 'no'} |")
    L += ["", "Medians over the rounds (the ratio is the median of the per-round ratios). Per round:", "",
          "| round | value | load avg | redis-server | kcache memory | kcache disk |", "|---:|---|---:|---:|---:|---:|"]
    for r in res["resp"]:
        L.append(f"| {r['round']} | {r['size']} B | {r['load_avg']:.1f} | {r['redis-server']['rps']:,.0f} | "
                 f"{r['kcache memory']['rps']:,.0f} | {r['kcache disk']['rps']:,.0f} |")
    rows = res["http"]
    ratio = statistics.median(r["kcache disk"]["rps"] / r["nginx"]["rps"] for r in rows)
    p99 = statistics.median(r["kcache disk"]["p99_us"] / r["nginx"]["p99_us"] for r in rows)
    L += ["", "## HTTP: 100 KB hot hits", "",
          f"`wrk -t2 -c32 -d{m['wrk_seconds']:g}s` GET of one 100 KB bundle, kcache disk storage (answered from "
          f"its hot tier) vs nginx serving the same bytes. Target: **{TARGET_HTTP}x** nginx's rate (before: "
          "0.97x, bench/server/REPORT.md).", "",
          f"Median request-rate ratio **{ratio:.2f}x** — target {'met' if ratio >= TARGET_HTTP else 'not met'}; "
          f"median p99 ratio (kcache ÷ nginx, lower is better) {p99:.2f}.", "",
          "| round | load avg | nginx req/s | nginx p50 / p99 ms | kcache req/s | kcache p50 / p99 ms | rate ratio |",
          "|---:|---:|---:|---|---:|---|---:|"]
    for r in rows:
        n, k = r["nginx"], r["kcache disk"]
        L.append(f"| {r['round']} | {r['load_avg']:.1f} | {n['rps']:,.0f} | {n['p50_us'] / 1000:.2f} / "
                 f"{n['p99_us'] / 1000:.2f} | {k['rps']:,.0f} | {k['p50_us'] / 1000:.2f} / {k['p99_us'] / 1000:.2f} | "
                 f"{k['rps'] / n['rps']:.2f}x |")
    errs = sum(r[t]["errors"] + r[t]["non2xx"] for r in rows for t in ("nginx", "kcache disk"))
    L += ["", f"Socket errors plus non-2xx answers over all HTTP runs: {errs}."]
    return "\n".join(L) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server-bin", default=str(REPO / "build/release/server/kcache-server"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--resp-n", type=int, default=100_000, help="GETs per redis-benchmark run")
    p.add_argument("--seconds", type=float, default=4.0, help="wrk duration per HTTP run")
    p.add_argument("--threads", type=int, default=2, help="kcache I/O threads = nginx workers")
    p.add_argument("--report", action="store_true", help="only rewrite HOT_PATH.md from hot_path.json")
    a = p.parse_args()
    out = HERE / "hot_path.json"
    if not a.report:
        out.write_text(json.dumps(run(a), indent=1) + "\n")
    md = HERE / "HOT_PATH.md"
    # A hand-written analysis at the end survives a rerun (it may then be stale: reread it).
    kept = ""
    if md.exists() and ANALYSIS in md.read_text():
        kept = "\n" + md.read_text()[md.read_text().index(ANALYSIS):]
    md.write_text(report(json.loads(out.read_text())) + kept)
    print(md.read_text())


if __name__ == "__main__":
    main()
