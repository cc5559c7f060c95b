#!/usr/bin/env bash
# ThreadSanitizer stage: kcache-server and the threaded C++ units built with
# clang's -fsanitize=thread (build/tsan), then
#   1. the positive control: tests/shell/tsan_race.cpp, a plain data race,
#      must be reported (else TSan is not working here and the stage fails);
#   2. the C++ tests of the threaded parts (hot tier, leases and metrics,
#      node tier, transport, circuit breaker) under TSan;
#   3. the server tests that drive its strands, blocking pool and atomics
#      hardest (single flight, leases, hot tier, RESP, artifacts, replicas on
#      one Redis) against the TSan server.
# Any report fails the stage: halt_on_error stops the process, and every
# report also lands in a log file that is checked at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
units=(server_hot_tier_test server_leases_metrics_test client_node_tier_test client_transport_test client_breaker_test)
CXX=clang++-14 SANITIZE=thread BUILD_DIR=build/tsan TARGETS="kcache-server ${units[*]}" scripts/build.sh

clang++-14 -fsanitize=thread -g -O1 tests/shell/tsan_race.cpp -o "$logs/race"
if TSAN_OPTIONS="halt_on_error=1 log_path=$logs/control" "$logs/race"; then
  echo "tsan: the positive control's race went unreported"; exit 1
fi
grep -q "WARNING: ThreadSanitizer: data race" "$logs"/control.* || { echo "tsan: no report from the control"; exit 1; }
echo "tsan: the positive control's race was reported"

export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 log_path=$logs/tsan"
for t in "${units[@]}"; do build/tsan/tests/cpp/$t --gtest_brief=1; done
KCACHE_SERVER_BIN="$root/build/tsan/server/kcache-server" KCACHE_BUILD_DIR="$root/build/dev" \
  .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 \
  tests/python/server/test_single_flight.py tests/python/server/test_leases.py tests/python/server/test_hot_tier.py \
  tests/python/server/test_resp.py tests/python/server/test_artifacts.py tests/python/server/test_replicas.py
if compgen -G "$logs/tsan.*" > /dev/null; then
  head -50 "$logs"/tsan.*; echo "tsan: reports above"; exit 1
fi
echo "tsan: no report"
