"""The access trace the retention benchmark replays (bench/retention/run.py).

A fleet's week, compressed: jobs of several teams ask for regions; a miss
compiles and uploads. What the trace models, each from what a shared
torch.compile cache sees:
  - production regions: a few hundred, reused every day, Zipf popularity,
    compile costs log-normal around 60 s (a large model's block under
    max-autotune costs minutes, a small one seconds);
  - sweeps: a team trying model sizes or flags compiles regions that are
    read a handful of times in a burst and never again: many, cheap to
    compile relative to their size, and recent, which is what LRU keeps;
  - sizes log-normal: kernels with autotuning tables are large, small
    blocks small; cost and size are only loosely related.
Each event is {"t": seconds, "key": 64 hex, "size": bytes, "cost": compile
seconds}. Seeded: the same arguments give the same trace.

    python3 bench/retention/trace.py --out bench/retention/trace.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random


def key_of(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def make_trace(seed: int, events: int, production: int, scale: int) -> list[dict]:
    rng = random.Random(seed)
    prod = []
    for i in range(production):
        size = int(min(64, max(1, rng.lognormvariate(math.log(8), 0.8))) * scale)
        cost = min(900.0, max(2.0, rng.lognormvariate(math.log(60), 0.9)))
        prod.append({"key": key_of(f"prod-{i}"), "size": size, "cost": round(cost, 1)})
    # Zipf(1.1) popularity over the production regions.
    weights = [1 / (r + 1) ** 1.1 for r in range(production)]
    out: list[dict] = []
    t = 0.0
    sweep = 0
    while len(out) < events:
        t += rng.expovariate(1.0)
        if rng.random() < 0.35:
            # A sweep: a burst of new regions, each read a few times, then never.
            sweep += 1
            regions = [{"key": key_of(f"sweep-{sweep}-{j}"),
                        "size": int(min(64, max(1, rng.lognormvariate(math.log(12), 0.7))) * scale),
                        "cost": round(min(120.0, max(1.0, rng.lognormvariate(math.log(8), 0.8))), 1)}
                       for j in range(rng.randint(3, 12))]
            for _ in range(rng.randint(1, 4)):
                for r in regions:
                    t += rng.expovariate(4.0)
                    out.append({"t": round(t, 3), **r})
        else:
            r = rng.choices(prod, weights)[0]
            out.append({"t": round(t, 3), **r})
    return out[:events]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--production", type=int, default=300)
    ap.add_argument("--scale", type=int, default=1024, help="bytes per size unit (the bench shrinks MiB to KiB)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    trace = make_trace(a.seed, a.events, a.production, a.scale)
    with open(a.out, "w") as f:
        for e in trace:
            f.write(json.dumps(e) + "\n")
    keys = {e["key"] for e in trace}
    print(f"{len(trace)} accesses, {len(keys)} distinct regions, "
          f"{sum({e['key']: e['size'] for e in trace}.values())} bytes if all were kept")


if __name__ == "__main__":
    main()
