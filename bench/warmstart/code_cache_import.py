"""The import of Inductor's code cache in a warm job, kcache's way
(kcache/_torch_adaptor_code_cache.py: without the redis client and without
torch.export.pt2_archive's package body) against a plain import, in fresh
processes that first import what a warm job has by then (torch and
transformers' GPT-2), alternated, medians.

    .venv/bin/python bench/warmstart/code_cache_import.py      # writes code_cache_import.json
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROUNDS = 7
PROBE = """
import sys, time, json, torch
from transformers import GPT2LMHeadModel
way = sys.argv[1]
t = time.perf_counter()
if way == "kcache":
    from kcache._torch_adaptor_code_cache import import_code_cache
    import_code_cache()
else:
    import torch._inductor.codecache
print(json.dumps({"s": time.perf_counter() - t,
                  "archive_body": "torch.export.pt2_archive._package" in sys.modules,
                  "serializer": "torch._export.serde.serialize" in sys.modules,
                  "redis": "redis" in sys.modules}))
"""


def one(way: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, way], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    import torch

    runs: dict[str, list[dict]] = {"plain": [], "kcache": []}
    for _ in range(ROUNDS):
        for way in runs:
            runs[way].append(one(way))
    med = {way: statistics.median(r["s"] for r in rs) for way, rs in runs.items()}
    result = {
        "command": "python bench/warmstart/code_cache_import.py", "torch": torch.__version__,
        "machine": platform.processor() or platform.machine(), "rounds": ROUNDS,
        "median_s": med, "saved_s": med["plain"] - med["kcache"], "ratio": med["plain"] / med["kcache"],
        "imported": {way: {k: rs[-1][k] for k in ("archive_body", "serializer", "redis")} for way, rs in runs.items()},
        "runs": runs,
    }
    (HERE / "code_cache_import.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("median_s", "saved_s", "ratio", "imported")}))


if __name__ == "__main__":
    main()
