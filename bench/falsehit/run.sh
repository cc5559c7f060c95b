#!/usr/bin/env bash
# Usage: bench/falsehit/run.sh [CASES_PER_WORKER] [WARM_PER_CASE] [TRACED_CASES] [MODE]
# MODE (issue 49): "all" (default) is the run below; "after" runs the two
# precompiled workers with --after-first-call (seeds 4000... and 5000...,
# results-after-first-*.json: each warm run mutates after the compiled
# model's first step); "between" runs them as below but writes
# results-between-watch-*.json (seeds 6000... and 7000...), the
# between-processes mode again with the per-call watch in place. Neither
# runs the traced cases. "background" (issue 51) runs them as below with
# each cold run compiled in kcache's compile worker (--cold-start
# background, seeds 8000... and 9000..., results-background-*.json).
# "configs" (issue 67) runs them with --configs --cold-start alternate
# (seeds 10000... and 11000..., results-configs-*.json: compiler settings
# as the mutations, stock torch.compile the reference), then the positive
# control: every case's pass-toggling warm run with the pass left out of
# the key (--unkeyed, results-control-configs.json).
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
mode=${4:-all}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$root/tests" TORCHINDUCTOR_COMPILE_THREADS=1 OMP_NUM_THREADS=1
if [[ $mode == after || $mode == between || $mode == background || $mode == configs ]]; then
  if [[ $mode == after ]]; then seeds=(4000 5000) name=after-first flag=--after-first-call
  elif [[ $mode == configs ]]; then seeds=(10000 11000) name=configs flag="--configs --cold-start alternate"
  elif [[ $mode == background ]]; then seeds=(8000 9000) name=background flag="--cold-start background"
  else seeds=(6000 7000) name=between-watch flag=; fi
  "$py" -m falsehit.runner --seed "${seeds[0]}" --cases "$cases" --warm "$warm" $flag --work "$work/a" \
    --out "$here/results-$name-a.json" 2>"$work/a.log" &
  a=$!
  "$py" -m falsehit.runner --seed "${seeds[1]}" --cases "$cases" --warm "$warm" $flag --work "$work/b" \
    --out "$here/results-$name-b.json" 2>"$work/b.log" &
  b=$!
  wait "$a" "$b"
  if [[ $mode == configs ]]; then
    "$py" -m falsehit.runner --seed 10000 --cases "$cases" --warm 2 --runs 1 --configs \
      --unkeyed inductor.post_grad_custom_post_pass --work "$work/c" \
      --out "$here/results-control-configs.json" 2>"$work/c.log"
  fi
  "$py" "$here/report.py"
  exit 0
fi
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
