"""What a rank pays, per region key, to send its module globals to its
compile worker (kcache/background/global_state.py, docs/cold-start.md):
the walk that finds them and the capture that freezes them, for one block
of GPT-2 and of Llama (12-layer configs of the bench models, hidden 64),
the median of --repeats runs each, and what is found. Reference: the
whole skeleton of the same block and call (skeleton.describe, globals
included: everything a job sends), timed in the same run; the printed
share is the capture's part of it.

    .venv/bin/python bench/coldstart/global_walk.py --out bench/coldstart/global_walk.json
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python" / "compile"))


def timed(fn, repeats: int) -> tuple[float, object]:
    runs, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs) * 1e3, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    from background_job import build_model

    from kcache.background import global_state, skeleton

    rows = []
    for family in ("gpt2", "llama"):
        torch.manual_seed(0)
        model = build_model(family, 12, 64)
        block = (model.transformer.h if family == "gpt2" else model.model.layers)[0]
        captured = {}
        h = block.register_forward_pre_hook(lambda m, a, k: captured.setdefault("call", (a, k)), with_kwargs=True)
        model(torch.randint(0, 256, (2, 16)))
        h.remove()
        a, k = captured["call"]
        walk_ms, found = timed(lambda: global_state.reachable(block), args.repeats)
        capture_ms, state = timed(lambda: global_state.capture(block), args.repeats)
        skeleton_ms, payload = timed(lambda: skeleton.describe(block, a, k), args.repeats)
        rows.append({
            "model": family, "walk_ms": round(walk_ms, 2), "capture_ms": round(capture_ms, 2),
            "globals_found": sum(len(v) for v in found.globals.values()),
            "globals_carried": sum(len(v) for v in state["globals"].values()),
            "modules": len(found.globals), "classes": [c.__qualname__ for c in found.classes],
            "globals_bytes": len(pickle.dumps(state)),
            "skeleton_ms": round(skeleton_ms, 2), "skeleton_bytes": len(payload),
            "not_carried": sorted(f"{m}.{n}" for m, names in found.globals.items() for n in names
                                  if n not in state["globals"].get(m, {})),
        })
    result = {"torch": torch.__version__, "repeats": args.repeats, "rows": rows}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for r in rows:
        print(f"{r['model']}: {r['globals_carried']}/{r['globals_found']} globals of {r['modules']} modules, "
              f"walk {r['walk_ms']} ms, capture {r['capture_ms']} ms, {r['globals_bytes']} B; the whole "
              f"skeleton (globals included) {r['skeleton_ms']} ms, {r['skeleton_bytes']} B "
              f"(globals {r['capture_ms'] / r['skeleton_ms']:.2f} of its time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
