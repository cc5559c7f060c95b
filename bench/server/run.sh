#!/usr/bin/env bash
# kcache-server load benchmark: GET-hit and PUT throughput and p50/p99 for
# 1 KB / 100 KB / 4 MB at 1 / 32 / 128 connections, disk and redis backends,
# against nginx (same bytes, sendfile on) and redis-benchmark (-P 1), all in
# one run of about five minutes. Writes bench/server/REPORT.md.
#
# Usage: bench/server/run.sh [path/to/kcache-server] [extra bench.py options]
# Measure an optimized build (cmake -DCMAKE_BUILD_TYPE=Release): an
# unoptimized server is several times slower and the ratios mean nothing.
# Needs: wrk, nginx (nginx-light), redis-server, redis-benchmark — Debian:
#   apt-get install -y wrk nginx-light redis-server
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${1:-${KCACHE_SERVER_BIN:-$REPO/build/dev/server/kcache-server}}
shift || true
PY=${PYTHON:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=python3
exec "$PY" "$HERE/bench.py" --server-bin "$BIN" "$@"
