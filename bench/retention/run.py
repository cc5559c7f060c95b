"""Retention by value against plain LRU, on one recorded access trace, at
equal capacity, through the real kcache-server (docs/namespaces.md
"Retention by value").

Two namespaces on one server, each with the same byte quota: "value"
(retention policy value) and "lru" (policy lru). The trace
(bench/retention/trace.jsonl, made by trace.py) is replayed against each:
every access is a GET; a 404 is a compile, so the replay uploads the
region's bundle (its manifest carrying the trace's compile seconds, its
payload the trace's size) and the server's quota admission evicts by the
namespace's policy. A 200 saved the region's compile seconds. The hot tier
is off so that the store counts every hit (docs/namespaces.md notes why).

Prints and writes (--out) for both policies: hits, misses, compile seconds
saved, saved per MiB of capacity, evictions, and value/LRU ratios; the
verdict line is computed from those numbers.

    .venv/bin/python bench/retention/run.py --capacity-fraction 0.25 \
        --out bench/retention/results.json

The trace stands for a week (--trace-days) and is replayed in --replay-s
seconds of wall clock, both policies at once; the value policy's window
(--window-days, a day) is scaled by the same factor, since the server ages
entries by its own clock.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/python"))

from harness.bundles import make_bundle  # noqa: E402
from harness.server import ServerProcess  # noqa: E402

POLICIES = ["value", "lru"]


def replay(srv: ServerProcess, ns: str, trace: list[dict], start: float, speed: float) -> dict:
    """Replays the trace against namespace `ns`, each access at wall time
    start + t / speed (the server's clock ages entries: the value policy's
    window is in the same compressed time)."""
    hits = misses = stored = refused = 0
    saved = spent = 0.0
    headers = {"X-Kcache-Namespace": ns}
    bundles: dict[str, bytes] = {}
    for e in trace:
        delay = start + e["t"] / speed - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        status, _, _ = srv.http("GET", f"/v1/artifacts/{e['key']}", headers=headers)
        if status == 200:
            hits += 1
            saved += e["cost"]
            continue
        assert status == 404, status
        misses += 1
        spent += e["cost"]
        b = bundles.get(e["key"])
        if b is None:
            # Incompressible bytes (bundles are zstd-compressed): the stored size is the trace's.
            payload = random.Random(e["key"]).randbytes(e["size"])
            b = bundles[e["key"]] = make_bundle(e["key"], payload=payload, compile_seconds=e["cost"],
                                                label=f"Block/{e['key'][:6]}")
        status, _, body = srv.http("PUT", f"/v1/artifacts/{e['key']}", body=b,
                                   headers={**headers, "Content-Type": "application/octet-stream"})
        if status in (200, 201):
            stored += 1
        elif status == 507:
            refused += 1
        else:
            raise RuntimeError(f"PUT {status}: {body[:300]!r}")
    return {"hits": hits, "misses": misses, "stored": stored, "refused": refused,
            "compile_s_saved": round(saved, 1), "compile_s_spent": round(spent, 1)}


def run_pair(trace: list[dict], quota: int, speed: float, window: str) -> dict[str, dict]:
    """One server, two namespaces with the same quota (value and lru), the
    trace replayed against both at once on the same clock."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        ns_file = tmp / "namespaces.json"
        ns_file.write_text(json.dumps({"namespaces": {
            p: {"quota_bytes": quota, "retention": {"policy": p, "window": window}} for p in POLICIES}}))
        srv = ServerProcess(tmp, f"disk:{tmp / 'store'}", ["--namespaces", str(ns_file), "--hot-cache-bytes", "0"],
                            wait_healthy=True)
        try:
            results: dict[str, dict] = {}
            start = time.monotonic() + 0.5

            def run(p: str) -> None:
                results[p] = replay(srv, p, trace, start, speed)
                results[p]["replay_s"] = round(time.monotonic() - start, 1)

            threads = [threading.Thread(target=run, args=(p,)) for p in POLICIES]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stats = {n["name"]: n for n in json.loads(srv.http("GET", "/v1/stats")[2])["namespaces"]}
        finally:
            srv.stop()
    for p in POLICIES:
        results[p]["quota_evictions"] = stats[p]["quota_evictions"]["entries"]
        results[p]["bytes_at_end"] = stats[p]["bytes"]
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=str(ROOT / "bench/retention/trace.jsonl"))
    ap.add_argument("--capacity-fraction", type=float, default=0.25,
                    help="quota as a fraction of the bytes of every region in the trace")
    ap.add_argument("--trace-days", type=float, default=7.0, help="how many days the trace stands for")
    ap.add_argument("--window-days", default="1",
                    help="the value policy's half-life in the trace's days (scaled to the replay's wall clock); "
                         "a comma-separated list runs one replay per window, each beside its own LRU replay")
    ap.add_argument("--replay-s", type=float, default=60.0, help="wall-clock seconds the replay of the trace takes")
    ap.add_argument("--out")
    a = ap.parse_args()
    trace = [json.loads(line) for line in open(a.trace)]
    total = sum({e["key"]: e["size"] for e in trace}.values())
    overhead = len(make_bundle("0" * 64, payload=b"", compile_seconds=1.0, label="Block/000000"))
    quota = int(a.capacity_fraction * (total + overhead * len({e["key"] for e in trace})))
    # The trace's span stands for --trace-days; it is replayed in --replay-s,
    # so one trace day is replay_s / trace_days seconds of wall clock.
    speed = trace[-1]["t"] / a.replay_s
    rows = []
    for window_days in [float(w) for w in a.window_days.split(",")]:
        window_s = max(1.0, window_days * a.replay_s / a.trace_days)
        results = run_pair(trace, quota, speed, f"{window_s:.3f}s")
        for p in POLICIES:
            r = results[p]
            r["hit_ratio"] = round(r["hits"] / len(trace), 4)
            r["compile_s_saved_per_mib"] = round(r["compile_s_saved"] / (quota / 2**20), 2)
        ratio = results["value"]["compile_s_saved"] / max(results["lru"]["compile_s_saved"], 1e-9)
        rows.append({"window_days": window_days, "window_wall_s": window_s, "results": results,
                     "saved_ratio_value_over_lru": round(ratio, 3)})
    best = max(rows, key=lambda r: r["saved_ratio_value_over_lru"])
    wins = [r for r in rows if r["saved_ratio_value_over_lru"] >= 1]
    verdict = (f"value saves more compile seconds than LRU at equal capacity with {len(wins)} of {len(rows)} windows "
               f"(best {best['saved_ratio_value_over_lru']:.2f}x at a {best['window_days']:g}-day window)"
               if wins else "value saves LESS than LRU at every window tried")
    doc = {"command": "bench/retention/run.py " + " ".join(sys.argv[1:]), "trace": a.trace,
           "accesses": len(trace), "distinct_regions": len({e["key"] for e in trace}), "trace_bytes": total,
           "quota_bytes": quota, "capacity_fraction": a.capacity_fraction, "trace_days": a.trace_days,
           "replay_s": a.replay_s, "rows": rows, "verdict": verdict,
           "when": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    print(f"trace: {len(trace)} accesses, {doc['distinct_regions']} regions, {total} bytes; quota {quota} bytes "
          f"({a.capacity_fraction:.0%}); {a.trace_days:g} trace days in {a.replay_s:g} s")
    print(f"{'window':>7} {'policy':7} {'hits':>6} {'ratio':>6} {'saved s':>9} {'spent s':>9} {'s/MiB':>8} "
          f"{'evicted':>8} {'value/lru':>9}")
    for row in rows:
        for p in POLICIES:
            r = row["results"][p]
            print(f"{row['window_days']:6g}d {p:7} {r['hits']:6d} {r['hit_ratio']:6.3f} {r['compile_s_saved']:9.1f} "
                  f"{r['compile_s_spent']:9.1f} {r['compile_s_saved_per_mib']:8.2f} {r['quota_evictions']:8d} "
                  f"{row['saved_ratio_value_over_lru'] if p == 'value' else '':>9}")
    print("verdict:", verdict)
    if a.out:
        pathlib.Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
