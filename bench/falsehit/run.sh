#!/usr/bin/env bash
# Usage: bench/falsehit/run.sh [CASES_PER_WORKER] [WARM_PER_CASE] [TRACED_CASES]
# The false-hit fuzzer's long run (issue 32; docs/precompiled.md "Guards"):
# two workers at once (seeds 1000... and 2000...), CASES_PER_WORKER
# generated blocks each (default 39) with WARM_PER_CASE warm runs per block
# (default 40): 3,120 warm runs by default on the precompiled path (14 of
# each block's 40 repeat the cold run's mutations: the positive controls;
# the other 2,028 add one or two), then
# TRACED_CASES blocks (default 6, 6 warm runs each) on the traced path
# (KCACHE_PRECOMPILED=0, real torch.compile). Writes results-*.json here
# and REPORT.md (bench/falsehit/report.py) from them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py="$root/.venv/bin/python"
cases=${1:-39}
warm=${2:-40}
traced=${3:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$root/tests" TORCHINDUCTOR_COMPILE_THREADS=1 OMP_NUM_THREADS=1
"$py" -m falsehit.runner --seed 1000 --cases "$cases" --warm "$warm" --work "$work/a" \
  --out "$here/results-precompiled-a.json" 2>"$work/a.log" &
a=$!
"$py" -m falsehit.runner --seed 2000 --cases "$cases" --warm "$warm" --work "$work/b" \
  --out "$here/results-precompiled-b.json" 2>"$work/b.log" &
b=$!
wait "$a" "$b"
"$py" -m falsehit.runner --seed 3000 --cases "$traced" --warm 6 --traced --work "$work/t" \
  --out "$here/results-traced.json" 2>"$work/t.log"
"$py" "$here/report.py"
