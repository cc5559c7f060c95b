#!/usr/bin/env bash
# The whole test suite: installs what it needs, checks the layering, builds,
# then runs the C++ tests (plain and under ASan+UBSan), the server image's
# build inputs (docker/check_build.py), the threaded parts
# under ThreadSanitizer, docs/protocol.md's examples against a
# real server, the bundle-reader, RESP-parser and HTTP front-door fuzzers for a bounded time
# each, the client wheel in a clean root (tests/shell/wheel_clean_root.sh), and pytest
# (real redis-server, real kcache-server, real torch.compile).
#   FUZZ_SECONDS  budget of each fuzzer (default 60)
#   QUICK=1       skip the sanitizer build, the fuzzer and the wheel check
#   PYTEST_WORKERS  pytest-xdist workers (default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

declare -a timings=()
stage() {
  local name=$1; shift
  echo "=== $name"
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  # A failed stage's time is printed too (marked), then the run stops.
  timings+=("$(printf '%-12s %5ds%s' "$name" $((SECONDS - t0)) "$( ((rc)) && echo "  (failed: exit $rc)")")")
  return $rc
}
junit=("$root/build/junit-ctest.xml" "$root/build/junit-asan.xml" "$root/build/junit-pytest.xml")
report() {
  echo "=== stage times"
  printf '%s\n' "${timings[@]}"
  # Passed, failed, skipped (each skip with its reason), however the run ended.
  python3 "$root/scripts/test_summary.py" --slowest 25 "${junit[@]}" || true
}
trap report EXIT

export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1

stage setup scripts/setup.sh
# Each C++ file includes only what its target links (docs/architecture.md).
stage layers python3 scripts/check_layers.py
stage py-layers python3 scripts/check_py_layers.py
# No module-level Python name bound twice (an import a def shadows).
stage py-names python3 scripts/check_py_names.py
stage doc-paths python3 scripts/check_doc_paths.py
stage build scripts/build.sh
rm -f "${junit[@]}"
stage ctest ctest --test-dir build/dev --output-on-failure -j2 --output-junit "$root/build/junit-ctest.xml"
stage doc-examples tests/shell/curl_test.sh build/dev/server/kcache-server  # docs/protocol.md's examples
# The server image's inputs: kcache-server and kcache built from exactly the
# Dockerfile's COPYs (ccache reuses build/dev's objects), each COPY shown to
# be needed, and the compose file checked against the Dockerfile and the
# server's option table, with planted mistakes (docs/operations.md "Docker").
stage docker .venv/bin/python docker/check_build.py --control
if [[ ${QUICK:-0} != 1 ]]; then
  stage asan-build env SANITIZE=1 BUILD_DIR=build/asan scripts/build.sh
  stage asan-ctest ctest --test-dir build/asan --output-on-failure -j2 --output-junit "$root/build/junit-asan.xml"
  # kcache-server's strands, pool and atomics under ThreadSanitizer (clang),
  # with a positive control (tests/shell/tsan.sh).
  stage tsan tests/shell/tsan.sh
  stage fuzz fuzz/run.sh "${FUZZ_SECONDS:-60}"
  # The client wheel (scripts/wheel.sh) installed in a clean Debian root
  # without compiler or -dev packages, and a warm start through it.
  stage wheel tests/shell/wheel_clean_root.sh
fi
# pytest-xdist: PYTEST_WORKERS processes (default 3 on this 2-core
# machine: the torch tests keep both cores busy, the server tests mostly
# wait), each handed whole modules (a module's fixtures start once, and the
# traced-path tests share one cold compile), the longest modules first
# (tests/python/conftest.py; --no-loadscope-reorder keeps that order, where
# xdist would put the modules with the most tests first). Every test has its own tmp_path and random
# loopback ports, so workers share nothing.
stage pytest env KCACHE_BUILD_DIR="$root/build/dev" .venv/bin/python -m pytest -q -ra tests/python \
  -n "${PYTEST_WORKERS:-3}" --dist loadscope --no-loadscope-reorder --junitxml="$root/build/junit-pytest.xml"
# A skip docs/STATUS.md does not name fails the run (scripts/test_summary.py).
stage skips python3 scripts/test_summary.py --gate --quiet "${junit[@]}"
