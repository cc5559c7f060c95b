"""The tested matrix (docs/torch-support.md, docs/STATUS.md), printed from
bench/compat's committed results: one row per results file, its verdict
from its counts; then the warm-start benchmark's GPT-2 12-block row per
torch release (bench/warmstart/results-torch*.json), its verdict from the
counters of its warm precompiled cell (the pinned torch's from
bench/warmstart/results.json).  python3 bench/compat/matrix.py"""

import json
import sys
import pathlib

HERE = pathlib.Path(__file__).parent


def main() -> None:
    print("| torch | transformers | accelerate | kcache path | passed | failed | skipped | verdict | result |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in sorted(HERE.glob("results*.json")):
        if "subset" in f.name:
            continue
        r = json.loads(f.read_text())
        v = r["versions"]
        failed, skipped = len(r["failed"]), len(r["skipped"])
        verdict = "all passed" if not failed and r["pytest_rc"] == 0 else f"{failed} failed"
        print(f"| {v['torch']} | {v['transformers']} | {v['accelerate']} | {r.get('kcache_path', 'precompiled')} "
              f"| {r['passed']} | {failed} | {skipped} | {verdict} | bench/compat/{f.name} ({r['date']}) |")


def warmstart() -> None:
    sys.path.insert(0, str(HERE.parent / "warmstart"))
    from report import phase_overhead
    # The pinned torch's row from the four-configuration run (results.json),
    # each other release's from its own --quick run.
    files = [HERE.parent / "warmstart" / "results.json",
             *sorted((HERE.parent / "warmstart").glob("results-torch*.json"))]
    print()
    print("| torch | transformers | cold regional | PyTorch warm dir | PyTorch remote | kcache traced "
          "| kcache precompiled | cold / precompiled | warm dir / precompiled | precompiled warm: traces, FX misses, compiler imported "
          "| same losses | result |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in files:
        r = json.loads(f.read_text())
        row = next(x for x in r["rows"] if (x["model"], x["layers"]) == ("gpt2", 12))
        c = row["cells"]
        # Overheads in the phases whose code differs from eager's (wrap +
        # first step), as bench/warmstart/REPORT.md judges them.
        o = {k: phase_overhead(c, k) for k in ("cold_regional", "pytorch_warm_dir", "pytorch_remote",
                                               "kcache_traced", "kcache_precompiled")}
        p = c["kcache_precompiled"]
        clean = p["dynamo_traces"] == 0 and p["fxgraph_miss"] == 0 and not p["compiler_modules"]
        same = p["losses"] == c["kcache_precompiled_cold"]["losses"]
        print(f"| {r['versions']['torch']} | {r['versions']['transformers']} | "
              + " | ".join(f"{v:.2f} s" for v in o.values())
              + f" | {o['cold_regional'] / max(o['kcache_precompiled'], 1e-3):.1f}x "
              f"| {o['pytorch_warm_dir'] / max(o['kcache_precompiled'], 1e-3):.1f}x "
              f"| {p['dynamo_traces']}, {p['fxgraph_miss']}, {'no' if not p['compiler_modules'] else 'yes'}"
              f"{'' if clean else ' (NOT clean)'} | {'yes' if same else 'NO'} "
              f"| bench/warmstart/{f.name} ({row['date']}, median of {r.get('repeats', 5)}) |")


if __name__ == "__main__":
    main()
    warmstart()
