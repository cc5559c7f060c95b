#!/usr/bin/env bash
# Runs every ```sh block of docs/protocol.md (and of README.md, if it has
# any that use $KCACHE) against a freshly started kcache-server, in order,
# in one shell — exactly as written. A "# HTTP/1.1 NNN ..." line under a
# command is the status line the command's output must contain; they are
# checked in order. ```bash blocks are illustrations that need more than a
# server (a training script, a system path) and are not run. The blocks run
# with the project's .venv first on PATH (kcache importable), as the doc says.
#
# Usage: tests/shell/curl_test.sh [path/to/kcache-server]
#   (default: $KCACHE_SERVER_BIN, else build/dev/server/kcache-server)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-${KCACHE_SERVER_BIN:-$REPO/build/dev/server/kcache-server}}
[ -x "$BIN" ] || { echo "curl_test: no kcache-server at $BIN" >&2; exit 2; }
command -v curl >/dev/null || { echo "curl_test: curl not installed" >&2; exit 2; }

WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID"
    wait "$SERVER_PID" || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Start on a random port; the first stdout line names it.
mkfifo "$WORK/out"
"$BIN" --listen 127.0.0.1:0 --storage "disk:$WORK/data" >"$WORK/out" 2>"$WORK/server.log" &
SERVER_PID=$!
exec 3<"$WORK/out"
read -r -t 10 line <&3 || { echo "curl_test: server did not start" >&2; cat "$WORK/server.log" >&2; exit 1; }
PORT=${line##*:}
export KCACHE="http://127.0.0.1:$PORT"
export TMPDIR="$WORK"
export PATH="$REPO/.venv/bin:$PATH"
echo "curl_test: kcache-server on $KCACHE"

# Extract the blocks: one file per block.
python3 - "$WORK/blocks" "$REPO/docs/protocol.md" "$REPO/README.md" <<'PY'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1]); out.mkdir()
n = 0
for doc in sys.argv[2:]:
    p = pathlib.Path(doc)
    if not p.exists():
        continue
    for m in re.finditer(r"^```sh\n(.*?)^```", p.read_text(), re.S | re.M):
        block = m.group(1)
        if p.name == "README.md" and "$KCACHE" not in block:
            continue
        n += 1
        (out / f"{n:03d}.sh").write_text(f"# from {p.name}\n" + block)
print(f"curl_test: {n} blocks")
PY

cd "$REPO"
failures=0
checked=0
set +e
for block in "$WORK"/blocks/*.sh; do
  name=$(basename "$block")
  # Sourced in this shell, so variables (KEY, LEASE, …) carry to later blocks.
  source "$block" >"$WORK/output" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL $name: exit status $rc"; sed 's/^/    | /' "$block"; sed 's/^/    > /' "$WORK/output"
    failures=$((failures + 1))
    continue
  fi
  # Expected status lines, in order.
  n=$(python3 - "$block" "$WORK/output" <<'PY'
import re, sys
block = open(sys.argv[1]).read()
out = open(sys.argv[2], errors="replace").read().replace("\r", "")
want = [m.group(1) for m in re.finditer(r"^# (HTTP/1\.1 \d{3}\b.*)$", block, re.M)]
got = [l for l in out.splitlines() if re.match(r"HTTP/1\.1 \d{3}", l) and not l.startswith("HTTP/1.1 100")]
pos = 0
for w in want:
    code = w.split()[1]
    while pos < len(got) and got[pos].split()[1] != code:
        pos += 1
    if pos == len(got):
        print(f"    expected '{w}', got status lines {got}")
        sys.exit(1)
    pos += 1
print(len(want))
PY
)
  if [ $? -ne 0 ]; then
    echo "$n"
    echo "FAIL $name:"; sed 's/^/    | /' "$block"; sed 's/^/    > /' "$WORK/output" | head -40
    failures=$((failures + 1))
  else
    echo "ok $name ($n status lines)"
    checked=$((checked + 1))
  fi
done
set -e

if [ "$failures" -ne 0 ]; then
  echo "curl_test: $failures block(s) failed"; echo "--- server log (tail)"; tail -20 "$WORK/server.log"
  exit 1
fi
echo "curl_test: all $checked blocks passed"
