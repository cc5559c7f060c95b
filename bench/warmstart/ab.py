"""kcache's precompiled warm start, one package against another, in one run.

    .venv/bin/python bench/warmstart/ab.py --before 06e729f --out bench/warmstart/ab-issue53.json

The Python package at git revision --before (its compile/kcache, with this
checkout's built kcache._core) against the working tree's, on the job and
cells of bench/warmstart/run.py: eager, and a precompiled warm start of
each package in a fresh process with a fresh Inductor dir and a node tier
copied from that package's own cold run (no server: what differs between
the two is the Python package). Interleaved rounds, medians; the overhead
over eager of each, and after/before. Also checks that no warm run traced.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from run import median_of, run_cell  # noqa: E402


def package_at(rev: str, dest: Path) -> Path:
    """compile/kcache at `rev` under dest/, with this checkout's _core."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "compile/kcache"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    import kcache._core as core

    shutil.copy2(core.__file__, dest / "compile" / "kcache")
    return dest / "compile"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="git revision of the reference package")
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kcache-ab-"))
    try:
        import kcache._core  # the built binding both packages use

        after = work / "after" / "compile"
        shutil.copytree(REPO / "compile" / "kcache", after / "kcache",
                        ignore=shutil.ignore_patterns("__pycache__", "_core*.so"))
        shutil.copy2(kcache._core.__file__, after / "kcache")
        paths = {"before": package_at(a.before, work / "before"), "after": after}
        cells: dict[str, list[dict]] = {"eager": [], "before": [], "after": []}
        for name, path in paths.items():
            run_cell(work, a.model, a.layers, f"{name} cold", "kcache", f"ind-{name}-cold",
                     PYTHONPATH=str(path), KCACHE_LOCAL_DIR=str(work / f"node-{name}"))
        for i in range(a.repeats):
            cells["eager"].append(run_cell(work, a.model, a.layers, "eager", "eager", "ind-eager"))
            for name, path in paths.items():
                node = work / f"node-{name}-{i}"
                shutil.copytree(work / f"node-{name}", node)
                cells[name].append(run_cell(work, a.model, a.layers, f"{name} warm", "kcache",
                                            f"ind-{name}-{i}", PYTHONPATH=str(path),
                                            KCACHE_LOCAL_DIR=str(node)))
        med = {k: median_of(v) for k, v in cells.items()}
        eager = med["eager"]["to_first_step_s"]
        over = {k: round(med[k]["to_first_step_s"] - eager, 3) for k in ("before", "after")}
        traced = {k: sum(c["dynamo_traces"] for c in cells[k]) for k in ("before", "after")}
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        result = {"before": a.before, "after": f"{head} + working tree", "model": a.model,
                  "layers": a.layers, "repeats": a.repeats, "date": time.strftime("%Y-%m-%d %H:%M"),
                  "eager_s": eager, "overhead_s": over, "warm_dynamo_traces": traced,
                  "after_over_before": round(over["after"] / over["before"], 3) if over["before"] else None,
                  "cells": med}
        a.out.write_text(json.dumps(result, indent=1))
        print(f"eager {eager:.2f} s; precompiled warm overhead: before {over['before']:.3f} s, "
              f"after {over['after']:.3f} s (after/before {result['after_over_before']}); "
              f"warm Dynamo traces: {traced}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
