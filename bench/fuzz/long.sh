#!/usr/bin/env bash
# Long fuzz runs (the test command gives each fuzzer 60 s): the fuzzers of
# fuzz/run.sh (all three, or those named) for SECONDS each, one after
# another, at low priority, from the corpora fuzz/run.sh leaves in
# build-fuzz/. Keeps the head and the final stats of each run in
# bench/fuzz/<fuzzer>.log and rewrites bench/fuzz/summary.json from every
# log here; crashes land in build-fuzz/crashes/long-*.
#   bench/fuzz/long.sh 600
#   bench/fuzz/long.sh 600 resp_parser_fuzz
# UNIT_TIMEOUT (default 10 s) is libFuzzer's wall-clock limit per input: at
# nice 19 on a loaded machine a 10 ms input can wait longer than 10 s for a
# CPU (bench/fuzz/starved-timeouts.txt), so a run beside other work wants more.
set -uo pipefail
secs=${1:?usage: bench/fuzz/long.sh SECONDS [FUZZER...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build-fuzz"
"$root/fuzz/run.sh" 1 > /dev/null 2>&1 || { echo "fuzz/run.sh failed: build or seed first" >&2; exit 1; }
declare -A corpus=([bundle_reader_fuzz]=corpus [resp_parser_fuzz]=resp-corpus [http_front_fuzz]=http-corpus)
fuzzers=("$@")
((${#fuzzers[@]})) || fuzzers=(bundle_reader_fuzz resp_parser_fuzz http_front_fuzz)
for f in "${fuzzers[@]}"; do
  log="$root/bench/fuzz/$f.log"
  raw=$(mktemp)
  start=$(date -u +%FT%TZ)
  nice -n 19 "$build/fuzz/$f" "$build/${corpus[$f]}" -max_total_time="$secs" -timeout="${UNIT_TIMEOUT:-10}" \
    -rss_limit_mb=2048 -artifact_prefix="$build/crashes/long-$f-" -print_final_stats=1 > "$raw" 2>&1
  rc=$?
  { echo "# bench/fuzz/long.sh: $f started $start for $secs s at $(git -C "$root" rev-parse --short HEAD) (unit timeout ${UNIT_TIMEOUT:-10} s)"
    head -20 "$raw"; echo "# ..."; tail -60 "$raw"; echo "# exit $rc"; } > "$log"
  rm -f "$raw"
  echo "$f: exit $rc"
done
python3 - "$root/bench/fuzz" <<'PY'
import json, pathlib, re, sys
here = pathlib.Path(sys.argv[1])
rows = []
for log in sorted(here.glob("*_fuzz.log")):
    text = log.read_text(errors="replace")
    head = re.search(r"# bench/fuzz/long.sh: (\S+) started (\S+) for (\d+) s at (\S+)", text)
    runs = re.findall(r"stat::number_of_executed_units: (\d+)", text)
    rc = re.findall(r"^# exit (\d+)$", text, re.M)
    rows.append({"fuzzer": head.group(1), "started": head.group(2), "seconds": int(head.group(3)),
                 "commit": head.group(4), "runs": int(runs[-1]) if runs else None,
                 "exit": int(rc[-1]) if rc else None,
                 "clean": bool(rc) and rc[-1] == "0" and "deadly signal" not in text
                          and "ERROR: AddressSanitizer" not in text})
(here / "summary.json").write_text(json.dumps({"command": "bench/fuzz/long.sh SECONDS [FUZZER...]",
                                               "runs": rows}, indent=1) + "\n")
print(json.dumps(rows))
PY
