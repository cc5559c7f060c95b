#!/usr/bin/env python3
"""kcache-server load benchmark (bench/server/run.sh drives it; REPORT.md is its output).

In one run, on this machine: GET-hit and PUT throughput and p50/p99 latency of
kcache-server (disk and redis backends) for 1 KB, 100 KB and 4 MB artifacts at
1, 32 and 128 connections, driven by wrk; nginx serving the same bundle bytes
as static files (sendfile on) under the same wrk settings as the HTTP
reference; redis-benchmark GET/SET of the same sizes without pipelining as the
cache reference. Every ratio is printed, the founding target (docs/STATUS.md) flagged.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "compile"))
from kcache import _core  # noqa: E402

SIZES = [("1 KB", 1024), ("100 KB", 100 * 1024), ("4 MB", 4 * 1024 * 1024)]
CONNS = [1, 32, 128]
# Bundles per PUT run (each is PUT once): enough for a short run at these sizes.
PUT_BUNDLES = {1024: 8000, 100 * 1024: 1000, 4 * 1024 * 1024: 160}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def bundle(key: str, size: int) -> bytes:
    manifest = {"key": key, "label": f"Bench/cpu:bench/f32/default/train", "compile_seconds": 1.0}
    # Random bytes do not compress: the bundle is the payload plus ~200 bytes.
    return _core.write_bundle(json.dumps(manifest), [("mega_cache", secrets.token_bytes(size))], None, 1)


class Kcache:
    def __init__(self, binary: str, storage: str, log: pathlib.Path, threads: int, extra: list[str] | None = None):
        cmd = [binary, "--listen", "127.0.0.1:0", "--storage", storage, "--access-log", "false",
               "--log-level", "warn", "--threads", str(threads), *(extra or [])]
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on"):
            raise RuntimeError(f"kcache-server did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])

    def put(self, key: str, data: bytes) -> None:
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("PUT", f"/v1/artifacts/{key}", body=data)
        r = c.getresponse()
        r.read()
        assert r.status in (200, 201), r.status
        c.close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def wrk(url: str, conns: int, seconds: float, script: pathlib.Path, args: list[str] | None = None) -> dict:
    threads = min(2, conns)
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", str(script), url]
    if args:
        cmd += ["--", *args, str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120).stdout
    line = next((l for l in out.splitlines() if l.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no summary:\n{out}")
    r = json.loads(line[8:])
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    return r


def redis_benchmark(port: int, size: int, conns: int) -> dict:
    n = {1024: 60000, 100 * 1024: 15000, 4 * 1024 * 1024: 300}[size]
    if conns == 1:
        n //= 4
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set,get", "-d", str(size), "-c", str(conns),
                          "-n", str(n), "-P", "1", "--csv"], capture_output=True, text=True, timeout=300).stdout
    res = {}
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] in ("SET", "GET"):
            res[cells[0]] = {"rps": float(cells[1]), "p50_us": float(cells[4]) * 1000, "p99_us": float(cells[6]) * 1000}
    return res


def nginx_start(tmp: pathlib.Path, root: pathlib.Path, port: int, workers: int) -> subprocess.Popen:
    conf = tmp / "nginx.conf"
    conf.write_text(f"""
user root;
worker_processes {workers};
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  types {{ }}
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    root {root};
  }}
}}
""")
    p = subprocess.Popen(["nginx", "-c", str(conf), "-p", str(tmp)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_port(port)
    return p


def fmt_rps(x: float) -> str:
    return f"{x:,.0f}"


def fmt_ms(us: float) -> str:
    return f"{us / 1000:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin", default=str(REPO / "build/dev/server/kcache-server"))
    ap.add_argument("--seconds", type=float, default=4.0, help="wrk duration of each GET run")
    ap.add_argument("--put-seconds", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="kcache I/O threads = nginx workers")
    ap.add_argument("--report", default=str(HERE / "REPORT.md"))
    ap.add_argument("--json", default=None, help="also write raw results here")
    ap.add_argument("--from-json", default=None, help="only rewrite the report from a --json file of an earlier run")
    a = ap.parse_args()
    if a.from_json:
        saved = json.loads(pathlib.Path(a.from_json).read_text())
        meta = saved.pop("meta", {})
        a.seconds, a.put_seconds, a.threads = meta.get("seconds", a.seconds), meta.get("put_seconds", a.put_seconds), \
            meta.get("threads", a.threads)
        pathlib.Path(a.report).write_text(report(saved, a, meta.get("elapsed", 0)))
        return 0
    for tool in ("wrk", "nginx", "redis-server", "redis-benchmark"):
        if not shutil.which(tool):
            print(f"bench: {tool} not found (apt-get install -y wrk nginx-light redis-server)", file=sys.stderr)
            return 2
    started = time.monotonic()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kcache-bench-"))
    procs = []
    results = {"get": {}, "put": {}, "redis": {}}
    try:
        rport = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL)
        procs.append(redis)
        wait_port(rport)
        servers = {
            "disk": Kcache(a.server_bin, f"disk:{tmp}/disk", tmp / "disk.log", a.threads),
            "redis": Kcache(a.server_bin, f"redis://127.0.0.1:{rport}/0?pool=32", tmp / "redis.log", a.threads),
            # The disk backend without the in-memory hot tier: every hit is a storage read on the pool.
            "disk-nohot": Kcache(a.server_bin, f"disk:{tmp}/disk2", tmp / "disk2.log", a.threads,
                                 ["--hot-cache-bytes", "0"]),
        }
        www = tmp / "www" / "v1" / "artifacts"
        www.mkdir(parents=True)
        keys = {}
        for name, size in SIZES:
            key = secrets.token_hex(32)
            data = bundle(key, size)
            (www / key).write_bytes(data)
            for s in servers.values():
                s.put(key, data)
            keys[size] = (key, len(data))
        nport = free_port()
        procs.append(nginx_start(tmp, tmp / "www", nport, a.threads))
        targets = {"nginx": nport, "disk": servers["disk"].port, "disk-nohot": servers["disk-nohot"].port,
                   "redis": servers["redis"].port}
        get_lua = HERE / "get.lua"

        # GET hits. Each target gets a 1 s warm-up per size (the disk backend
        # verifies an object on its first read; nginx's page cache fills).
        for name, size in SIZES:
            key, blen = keys[size]
            for t, port in targets.items():
                wrk(f"http://127.0.0.1:{port}/v1/artifacts/{key}", 8, 1, get_lua)
            for c in CONNS:
                for t, port in targets.items():
                    r = wrk(f"http://127.0.0.1:{port}/v1/artifacts/{key}", c, a.seconds, get_lua)
                    r["bundle_bytes"] = blen
                    results["get"][f"{t}|{size}|{c}"] = r
                    print(f"GET {t:10} {name:6} c={c:<3} {r['rps']:>10,.0f} req/s p50 {fmt_ms(r['p50_us'])} ms "
                          f"p99 {fmt_ms(r['p99_us'])} ms errors {r['errors']} non2xx {r['non2xx']}", flush=True)

        # The target row again, nginx and disk alternating five times: on a
        # shared machine one pair of runs can land on a busy or a quiet moment.
        key, _ = keys[100 * 1024]
        results["headline"] = []
        for _ in range(5):
            pair = {}
            for t in ("nginx", "disk"):
                pair[t] = wrk(f"http://127.0.0.1:{targets[t]}/v1/artifacts/{key}", 32, a.seconds, get_lua)
            results["headline"].append(pair)
            print(f"headline nginx {pair['nginx']['rps']:,.0f} disk {pair['disk']['rps']:,.0f} req/s; p99 nginx "
                  f"{fmt_ms(pair['nginx']['p99_us'])} disk {fmt_ms(pair['disk']['p99_us'])} ms", flush=True)

        # redis-server itself, no pipelining.
        for name, size in SIZES:
            for c in CONNS:
                r = redis_benchmark(rport, size, c)
                results["redis"][f"{size}|{c}"] = r
                print(f"redis-benchmark {name:6} c={c:<3} SET {r['SET']['rps']:>10,.0f} GET {r['GET']['rps']:>10,.0f}",
                      flush=True)

        # PUTs of fresh bundles.
        put_lua = HERE / "put.lua"
        for name, size in SIZES:
            for c in CONNS:
                d = tmp / f"put-{size}-{c}"
                d.mkdir()
                index = []
                for _ in range(PUT_BUNDLES[size]):
                    k = secrets.token_hex(32)
                    (d / k).write_bytes(bundle(k, size))
                    index.append(k)
                (d / "index").write_text("\n".join(index) + "\n")
                for t in ("disk", "redis"):
                    # 4 MB uploads take long enough that a short run would end with most still in flight.
                    secs = a.put_seconds * (3 if size >= 4 << 20 else 1)
                    r = wrk(f"http://127.0.0.1:{targets[t]}/", c, secs, put_lua, [str(d)])
                    results["put"][f"{t}|{size}|{c}"] = r
                    print(f"PUT {t:5} {name:6} c={c:<3} {r['rps']:>10,.0f} req/s p50 {fmt_ms(r['p50_us'])} ms "
                          f"p99 {fmt_ms(r['p99_us'])} ms stored {r['stored']} repeats {r['repeats']} "
                          f"errors {r['errors']} non2xx {r['non2xx']}", flush=True)
                shutil.rmtree(d)
    finally:
        for s in locals().get("servers", {}).values():
            s.stop()
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started
    if a.json:
        meta = {"elapsed": elapsed, "seconds": a.seconds, "put_seconds": a.put_seconds, "threads": a.threads}
        pathlib.Path(a.json).write_text(json.dumps({**results, "meta": meta}, indent=1))
    pathlib.Path(a.report).write_text(report(results, a, elapsed))
    print(f"bench: {elapsed:.0f} s; report in {a.report}")
    return 0


def report(res: dict, a, elapsed: float) -> str:
    g, rb, p = res["get"], res["redis"], res["put"]
    def get(t, size, c):
        return g[f"{t}|{size}|{c}"]
    head = get("disk", 100 * 1024, 32), get("nginx", 100 * 1024, 32)
    ratio = head[0]["rps"] / head[1]["rps"]
    p99_ok = head[0]["p99_us"] <= head[1]["p99_us"]
    lines = [
        "# kcache-server load benchmark",
        "",
        f"Generated by `bench/server/run.sh` on {datetime.date.today()} ({platform.machine()}, "
        f"{os.cpu_count()} CPUs, Linux {platform.release()}); the whole run took {elapsed:.0f} s. "
        "kcache-server (a CMake `Release` build) "
        f"with `--threads {a.threads}` and no access log; nginx with `worker_processes {a.threads}`, "
        "`sendfile on`, no access log, serving the very same bundle bytes as files under `/v1/artifacts/<key>`; "
        "redis-server with no persistence. Load from `wrk` (2 threads, or 1 at one connection; "
        f"{a.seconds:g} s per GET run, {a.put_seconds:g} s per PUT run, three times that at 4 MB) on the same "
        "machine, so client and servers share the CPUs: compare within a row, not across machines. GET runs hit "
        "one hot key (after a 1 s warm-up); PUT runs upload a fresh bundle per request.",
        "",
        "## Target (founding target; docs/STATUS.md)",
        "",
        "Disk backend, 100 KB hot hits, 32 connections, ≥ 1.0x nginx's request rate with a p99 no worse.",
        "",
    ]
    rounds = res.get("headline", [])
    if rounds:
        ratios = sorted(r["disk"]["rps"] / r["nginx"]["rps"] for r in rounds)
        p99s = sorted(r["disk"]["p99_us"] / r["nginx"]["p99_us"] for r in rounds)
        med, p99_med = ratios[len(ratios) // 2], p99s[len(p99s) // 2]
        lines += [
            f"Five alternating rounds (nginx, then kcache, {a.seconds:g} s each): median request-rate ratio "
            f"**{med:.2f}x**, median p99 ratio (kcache ÷ nginx, lower is better) **{p99_med:.2f}** — "
            f"**{'met' if med >= 1.0 and p99_med <= 1.0 else 'NOT met'}**.",
            "",
            "| round | nginx req/s | nginx p99 | disk req/s | disk p99 | rate ratio | p99 ratio |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for i, r in enumerate(rounds, 1):
            n, d = r["nginx"], r["disk"]
            lines.append(f"| {i} | {fmt_rps(n['rps'])} | {fmt_ms(n['p99_us'])} | {fmt_rps(d['rps'])} | "
                         f"{fmt_ms(d['p99_us'])} | {d['rps'] / n['rps']:.2f}x | {d['p99_us'] / n['p99_us']:.2f} |")
        lines.append("")
    lines += [
        f"In the matrix below (one run each): **{ratio:.2f}x** ({fmt_rps(head[0]['rps'])} vs "
        f"{fmt_rps(head[1]['rps'])} req/s), p99 {fmt_ms(head[0]['p99_us'])} ms vs nginx "
        f"{fmt_ms(head[1]['p99_us'])} ms{'' if p99_ok else ' (worse)'}.",
        "",
        "## GET hits",
        "",
        "req/s and p50 / p99 latency in ms. Ratios are kcache's request rate over the reference's.",
        "",
        "| size | conns | nginx req/s | nginx p50 / p99 | disk req/s | disk p50 / p99 | disk ÷ nginx | "
        "disk, no hot tier req/s | p50 / p99 | ÷ nginx | "
        "redis-backend req/s | redis-backend p50 / p99 | redis-backend ÷ nginx | redis-backend ÷ redis-server GET |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, size in SIZES:
        for c in CONNS:
            n, d, r = get("nginx", size, c), get("disk", size, c), get("redis", size, c)
            dn = get("disk-nohot", size, c)
            rg = rb[f"{size}|{c}"]["GET"]
            lines.append(
                f"| {name} | {c} | {fmt_rps(n['rps'])} | {fmt_ms(n['p50_us'])} / {fmt_ms(n['p99_us'])} | "
                f"{fmt_rps(d['rps'])} | {fmt_ms(d['p50_us'])} / {fmt_ms(d['p99_us'])} | {d['rps'] / n['rps']:.2f}x | "
                f"{fmt_rps(dn['rps'])} | {fmt_ms(dn['p50_us'])} / {fmt_ms(dn['p99_us'])} | {dn['rps'] / n['rps']:.2f}x | "
                f"{fmt_rps(r['rps'])} | {fmt_ms(r['p50_us'])} / {fmt_ms(r['p99_us'])} | {r['rps'] / n['rps']:.2f}x | "
                f"{r['rps'] / rg['rps']:.2f}x |")
    errs = sum(v["errors"] + v["non2xx"] for v in g.values())
    lines += ["", f"Socket errors plus non-2xx answers over all GET runs: {errs}.", "",
              "## redis-server reference (redis-benchmark, `-P 1`)", "",
              "| size | conns | SET req/s | SET p50 / p99 | GET req/s | GET p50 / p99 | disk-backend GET ÷ redis GET |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, size in SIZES:
        for c in CONNS:
            r = rb[f"{size}|{c}"]
            d = get("disk", size, c)
            lines.append(f"| {name} | {c} | {fmt_rps(r['SET']['rps'])} | {fmt_ms(r['SET']['p50_us'])} / "
                         f"{fmt_ms(r['SET']['p99_us'])} | {fmt_rps(r['GET']['rps'])} | {fmt_ms(r['GET']['p50_us'])} / "
                         f"{fmt_ms(r['GET']['p99_us'])} | {d['rps'] / r['GET']['rps']:.2f}x |")
    lines += ["", "## PUT (fresh bundle per request)", "",
              "`stored` counts 201 answers; `repeats` counts 200 answers for a bundle sent a second time "
              "(a wrk thread ran out of fresh bundles and started over: first writer wins, nothing rewritten). "
              "Every PUT is fully checked (structure, SHA-256 trailer, key) before it is stored; the disk "
              "backend fsyncs each object and its directory.", "",
              "`req/s` counts every answer, `stored/s` only the 201s (the rate of new artifacts landing); "
              "the ratio is stored/s over redis-server's SET rate.", "",
              "| backend | size | conns | req/s | stored/s | p50 / p99 | stored | repeats | stored/s ÷ redis-server SET |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t in ("disk", "redis"):
        for name, size in SIZES:
            for c in CONNS:
                r = p[f"{t}|{size}|{c}"]
                s = rb[f"{size}|{c}"]["SET"]
                stored_rate = r["stored"] / (r["duration_us"] / 1e6)
                lines.append(f"| {t} | {name} | {c} | {fmt_rps(r['rps'])} | {fmt_rps(stored_rate)} | "
                             f"{fmt_ms(r['p50_us'])} / {fmt_ms(r['p99_us'])} | {r['stored']} | {r['repeats']} | "
                             f"{stored_rate / s['rps']:.3f}x |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
