#!/usr/bin/env bash
# The main demo: kcache-server on its embedded disk storage, and a real
# training job (a 12-block GPT-2 built from a config) compiled cold, then
# started again as a fresh process that fetches every region from the server.
# The run (both jobs' figures and counters, the date, the machine's load) is
# written to bench/demo/run.json (KCACHE_DEMO_OUT elsewhere); the README
# quotes the committed one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh

work=$(mktemp -d)
server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

build/dev/server/kcache-server --listen 127.0.0.1:0 --storage "disk:$work/server-data" \
  > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 100); do grep -q '^listening on' "$work/server.out" && break; sleep 0.1; done
addr=$(awk '/^listening on/ {print $3}' "$work/server.out")
[[ -n $addr ]] || { echo "kcache-server did not start:"; cat "$work/server.log"; exit 1; }
export KCACHE_URL="http://$addr"
# Precompiled regions (no Dynamo trace warm) are the default; said here so
# that a KCACHE_PRECOMPILED=0 in the caller's environment does not change
# what the demo shows (docs/precompiled.md).
export KCACHE_PRECOMPILED=1
echo "kcache-server on $KCACHE_URL (disk storage in $work/server-data)"

run() {
  # Each run is a new process with an empty node tier and an empty Inductor
  # cache directory: only the server carries work from one to the next.
  local name=$1
  shift
  KCACHE_LOCAL_DIR="$work/node-$name" TORCHINDUCTOR_CACHE_DIR="$work/inductor-$name" \
    .venv/bin/python examples/train_regional.py --model gpt2 --layers 12 --steps 3 "$@" \
    2>"$work/job-$name.log" | tail -1
}
summary() {
  .venv/bin/python - "$@" <<'PY'
import json, sys
label, d = sys.argv[1], json.loads(sys.argv[2])
k, ind, aot = d["kcache"], d["inductor"], d["aot_autograd"]
print(f"  {label}: first step {d['breakdown']['to_first_step_s']:5.1f} s after the process started "
      f"(compile or load + run {d['first_step_s']:.1f} s), later steps {d['later_step_s']*1000:5.0f} ms")
print(f"        regions compiled by this job's compile worker {k['background_jobs']} "
      f"(blocks ran eagerly in {len(d['eager_steps'])} steps, all compiled from "
      f"{d['all_compiled_s'] or d['breakdown']['to_first_step_s']:.1f} s), fetched from the server "
      f"{k['hits_server']}; blocks on the precompiled path {k['precompiled_blocks']}")
print(f"        PyTorch's counters: Dynamo traces {len(d['dynamo_traced'])}, "
      f"autograd_cache_miss={aot.get('autograd_cache_miss', 0)}, "
      f"fxgraph_cache_miss={ind.get('fxgraph_cache_miss', 0)}; {len(d['losses'])} steps, losses "
      f"{[round(x, 4) for x in d['losses'][:4]]}{' ...' if len(d['losses']) > 4 else ''}")
PY
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== cold: each distinct region is compiled once and uploaded: by a compile worker while the"
echo "   blocks run eagerly where it has cores the training leaves free, else in the first step"
echo "   (a CPU job on every core: this machine; docs/cold-start.md, \"Which mode\")"
cold=$(run cold --until-compiled); summary cold "$cold"
echo "== warm: a fresh process fetches every region; Dynamo traces nothing, PyTorch generates no code"
warm=$(run warm); summary warm "$warm"
.venv/bin/python - "$cold" "$warm" <<'PY'
import json, sys
c, w = (json.loads(a) for a in sys.argv[1:])
cs, ws = c["breakdown"]["to_first_step_s"], w["breakdown"]["to_first_step_s"]
gap = max(abs(a - b) for a, b in zip(c["losses"], w["losses"]))
how = "eager, a compile worker compiling" if c["kcache"]["background_jobs"] else "compiled in it"
print(f"== time to first step: cold {cs:.1f} s ({how}), all compiled at {c['all_compiled_s'] or cs:.1f} s; "
      f"warm {ws:.1f} s, compiled from its first step; the warm losses against the cold job's first "
      f"steps: largest difference {gap:.1e}")
PY
out=${KCACHE_DEMO_OUT:-bench/demo/run.json}
mkdir -p "$(dirname "$out")"
.venv/bin/python - "$cold" "$warm" "$load_before" > "$out" <<'PY'
import json, os, sys, time
c, w = (json.loads(a) for a in sys.argv[1:3])
print(json.dumps({"command": "bash scripts/demo.sh", "date": time.strftime("%Y-%m-%d %H:%M"),
                  "cpus": os.cpu_count(), "load_average_before": sys.argv[3],
                  "cold": c, "warm": w,
                  "to_first_step_s": {"cold": c["breakdown"]["to_first_step_s"],
                                      "warm": w["breakdown"]["to_first_step_s"]},
                  "all_compiled_s": {"cold": c["all_compiled_s"], "warm": w["all_compiled_s"]},
                  "largest_loss_gap_first_steps": max(abs(a - b) for a, b in zip(c["losses"], w["losses"]))},
                 indent=1))
PY
echo "== this run: $out"
echo "== the server's view (kcache stats)"
build/dev/cli/kcache --server "$KCACHE_URL" stats | head -20
