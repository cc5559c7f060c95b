"""One measurement in a fresh process: build a model, compile it one way, time it.

    python bench/regional/worker.py --family gpt2 --hidden 128 --layers 12 --batch 1 --how regional

Prints one JSON line: time to the first forward (includes compile), mean
steady forward time, and PyTorch's / kcache's counters. Inference, no_grad,
static shapes; the Inductor cache directory is whatever the caller set.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from models import zoo  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--family", choices=["gpt2", "llama"], required=True)
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--how", choices=["eager", "full", "regional", "kcache"], required=True)
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args()

    heads = max(2, a.hidden // 64)
    make = zoo.gpt2 if a.family == "gpt2" else zoo.llama
    torch.manual_seed(0)
    model = make(layers=a.layers, hidden=a.hidden, heads=heads)
    ids = torch.randint(0, 64, (a.batch, a.seq), generator=torch.Generator().manual_seed(0))

    import kcache
    from accelerate.utils import compile_regions

    if a.how == "full":
        model = torch.compile(model)
    elif a.how == "regional":
        model = compile_regions(model)
    elif a.how == "kcache":
        model = kcache.compile_regions(model)

    with torch.no_grad():
        t0 = time.perf_counter()
        model(ids)
        first = time.perf_counter() - t0
        for _ in range(2):
            model(ids)
        times = []
        for _ in range(a.iters):
            t0 = time.perf_counter()
            model(ids)
            times.append(time.perf_counter() - t0)
    from kcache import _torch_adaptor as adaptor

    c = adaptor.counters()
    print(json.dumps({"first_s": first, "step_s": statistics.median(times),
                      "fxgraph_miss": c.get("inductor", {}).get("fxgraph_cache_miss", 0),
                      "fxgraph_hit": c.get("inductor", {}).get("fxgraph_cache_hit", 0),
                      "kcache": kcache.stats() if a.how == "kcache" else {}}))


if __name__ == "__main__":
    main()
