"""Where a precompiled warm start's blocks' first calls go, from py-spy's
raw samples of warm runs (the share of samples under each function, among
the samples under PrecompiledRegion.run).

    # after one cold run has filled $N (KCACHE_LOCAL_DIR), for i in 1..4:
    KCACHE_LOCAL_DIR=$N TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) py-spy record --rate 1000 --format raw \\
        -o spy$i.txt -- .venv/bin/python examples/train_regional.py --layers 12 --steps 2
    python3 bench/warmstart/pyspy_first_calls.py spy1.txt spy2.txt spy3.txt spy4.txt > profile_first_calls.txt

py-spy pauses the process for each sample, so absolute times are inflated;
the shares are what the file reports.
"""

from __future__ import annotations

import collections
import re
import sys

ROOT = "PrecompiledRegion.run"
SHOWN = 60


def main(files: list[str]) -> None:
    inclusive: collections.Counter = collections.Counter()
    total = 0
    for name in files:
        with open(name) as f:
            for line in f:
                stack, _, count = line.rstrip().rpartition(" ")
                if ROOT not in stack:
                    continue
                n = int(count)
                frames = stack.split(";")
                first = max(i for i, fr in enumerate(frames) if ROOT in fr)
                total += n
                seen = set()
                for fr in frames[first:]:
                    key = re.sub(r":\d+\)", ")", fr)
                    if key not in seen:
                        seen.add(key)
                        inclusive[key] += n
    print(f"# samples under {ROOT}: {total} in {len(files)} runs; share of them under each function (inclusive)")
    for key, n in inclusive.most_common(SHOWN):
        print(f"{100 * n / total:6.1f}%  {key[:150]}")


if __name__ == "__main__":
    main(sys.argv[1:])
