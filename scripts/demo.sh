#!/usr/bin/env bash
# The main demo: a real training job (a GPT-2 built from a config) with
# kcache regional compilation, run cold and then warm in a fresh process.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export KCACHE_LOCAL_DIR="$work/node"

run() {
  # A fresh Inductor cache directory each time: only kcache carries work over.
  TORCHINDUCTOR_CACHE_DIR="$work/inductor-$1" .venv/bin/python examples/train_regional.py \
    --model gpt2 --layers 4 --steps 3 2>/dev/null | tail -1
}
summary() {
  .venv/bin/python -c '
import json, sys
d = json.loads(sys.argv[2])
k, ind = d["kcache"], d["inductor"]
print(f"{sys.argv[1]:>5}: first step {d[\"first_step_s\"]:6.1f}s  later steps {d[\"later_step_s\"]*1000:6.1f} ms"
      f"  kcache hits {k[\"hits_node\"]} misses {k[\"misses\"]}"
      f"  inductor fxgraph_cache_miss={ind.get(\"fxgraph_cache_miss\", 0)} hit={ind.get(\"fxgraph_cache_hit\", 0)}")
' "$1" "$2"
}

echo "== cold: every region compiled by PyTorch, stored by kcache"
cold=$(run cold); summary cold "$cold"
echo "== warm: a fresh process restores every region; PyTorch generates no code"
warm=$(run warm); summary warm "$warm"

echo
echo "This demo ran on kcache's node-local tier only. The kcache-server part of"
echo "the demo (server on disk storage, client fetching from it) is not built yet."
exit 3
