#!/bin/bash
# Builds kcache_storage_bench (Release) and runs it beside a private
# redis-server on a free loopback port. Takes about 2 minutes.
#   bench/storage/run.sh [BUILD_DIR] [WORK_DIR]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-/tmp/kcache-bench-storage-build}
WORK=${2:-/tmp/kcache-bench-storage-work}
cmake -G Ninja -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKCACHE_BUILD_TESTS=OFF >/dev/null
ninja -C "$BUILD" -j2 kcache_storage_bench >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
RPID=$!
trap 'kill $RPID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(redis-server --version | cut -d' ' -f3), disk: $(df --output=source,fstype "$(dirname "$WORK")" | tail -1)"
"$BUILD/bench/storage/kcache_storage_bench" --dir "$WORK" --redis-port "$PORT" "${@:3}"
