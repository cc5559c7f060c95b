#!/usr/bin/env bash
# Re-runs the tests whose printed figures docs/ cites, with their output
# kept (pytest -s), one log per test, the command and the build at its top.
# Usage: bash bench/evidence/run.sh   (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bench/evidence
# The build measured: the commit, and whether the tree differs from it
# (the logs this script rewrites do not count).
rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/evidence' || echo '+dirty')"
run() {  # name, pytest selection...
  local name=$1; shift
  {
    echo "# $(date -u +%FT%TZ) commit $rev"
    echo "# .venv/bin/python -m pytest -q -s $*"
    .venv/bin/python -m pytest -q -s "$@" 2>&1 | grep -v '^\s*$'
  } > "$out/$name.log"
  tail -1 "$out/$name.log"
}
run inspection_reads tests/python/server/test_upload_hostile.py -k reads_only
run paging_copies tests/python/server/test_upload_hostile.py -k "paging or share_one_scan or pages_by_key"
run redis_upload_memory tests/python/server/test_upload_spool.py -k "redis_storage or 64_mib_upload_sent_slowly"
run cluster_down tests/python/server/test_cluster_down.py
