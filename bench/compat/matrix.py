"""The tested matrix (docs/torch-support.md, docs/STATUS.md), printed from
bench/compat's committed results: one row per results file, its verdict
from its counts.  python3 bench/compat/matrix.py"""

import json
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


if __name__ == "__main__":
    main()
