#!/usr/bin/env bash
# Builds docker/Dockerfile for real without a Docker engine and smoke-tests
# the image: debootstrap makes a Debian bookworm base image, buildah builds
# the Dockerfile on it (docker format, so HEALTHCHECK is kept) with chroot
# isolation, and `buildah run --isolation chroot` runs a Redis container and
# the kcache-server container, wired as docker-compose.yml wires them.
# chroot isolation shares the host's network, so ports are on loopback.
#
# Checks: the compose file's services, volumes, health checks and
# environment; /readyz; an authenticated PUT and GET of a real bundle; a
# write without a token refused; /v1/stats; the CLI inside the container;
# the server listening on 0.0.0.0; data surviving a server container restart
# (Redis AOF volume) and a Redis restart; the disk profile's volume
# surviving a restart. Prints the image size and the server's start time.
#
# Needs root, debootstrap and buildah (apt-get install debootstrap buildah)
# and the Debian archive. About 15 minutes on 2 cores, most of it compiling.
#   docker/smoke.sh            # KEEP=1 keeps the work folder
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
PY=${PYTHON:-$root/.venv/bin/python}
work=$(mktemp -d /var/tmp/kcache-docker-XXXXXX)
containers=()
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for c in "${containers[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$work"
}
trap cleanup EXIT
say() { echo "smoke: $*"; }
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

say "compose file and Dockerfile (docker/check_compose.py)"
"$PY" docker/check_compose.py || fail "compose file"

base=localhost/kcache-base:bookworm
if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
  say "debootstrap bookworm (minbase)"
  debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$work/rootfs/." "$mnt/"
  buildah umount "$ctr" >/dev/null
  buildah commit --format docker "$ctr" "$base" >/dev/null
  buildah rm "$ctr" >/dev/null
  rm -rf "$work/rootfs"
fi

say "buildah bud docker/Dockerfile"
t0=$SECONDS
buildah bud --format docker --isolation chroot --pull=never --layers \
  --build-arg DEBIAN_IMAGE="$base" -f docker/Dockerfile -t localhost/kcache-server:latest . >"$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; fail "image build"; }
say "image built in $((SECONDS - t0)) s; size: $(buildah images --format '{{.Size}}' localhost/kcache-server:latest)"
buildah inspect --type image localhost/kcache-server:latest >"$work/image.json"
"$PY" - "$work/image.json" <<'EOF'
import json, sys
cfg = json.load(open(sys.argv[1]))["Docker"]["config"]
assert cfg["User"] == "kcache:kcache", cfg["User"]
assert "/var/lib/kcache" in cfg["Volumes"]
assert "/readyz" in " ".join(cfg["Healthcheck"]["Test"]), cfg["Healthcheck"]
assert any(e.startswith("KCACHE_LISTEN=0.0.0.0:") for e in cfg["Env"])
print("image: non-root user, volume, HEALTHCHECK on /readyz, 0.0.0.0 with tokens")
EOF

say "redis container (AOF on a volume)"
redis_ctr=$(buildah from --pull=never "$base"); containers+=("$redis_ctr")
buildah run --isolation chroot "$redis_ctr" -- sh -c \
  'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null' \
  >"$work/redis-install.log" 2>&1 || fail "redis install"
mkdir -p "$work/redis-data" "$work/kcache-data" "$work/secrets"
chmod 777 "$work/kcache-data"
rport=$(free_port)
start_redis() {
  buildah run --isolation chroot -v "$work/redis-data:/data" "$redis_ctr" -- \
    redis-server --port "$rport" --bind 127.0.0.1 --appendonly yes --appendfsync always --dir /data --save "" \
    >>"$work/redis.log" 2>&1 &
  redis_pid=$!; pids+=("$redis_pid")
  for _ in $(seq 100); do redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG && return; sleep 0.1; done
  fail "redis container did not start"
}
start_redis

write=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_'); read=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
printf '%s write\n%s read\n' "$write" "$read" >"$work/secrets/tokens"
chmod 644 "$work/secrets/tokens"
port=$(free_port)
server_ctr=$(buildah from --pull=never localhost/kcache-server:latest); containers+=("$server_ctr")
start_server() {  # $1: storage URI
  local t0 try; t0=$(date +%s%N)
  for try in 1 2 3; do
    buildah run --isolation chroot --user kcache:kcache \
      -v "$work/kcache-data:/var/lib/kcache" -v "$work/secrets/tokens:/run/secrets/kcache_tokens:ro" \
      "$server_ctr" -- /usr/local/bin/kcache-server --listen "0.0.0.0:$port" --storage "$1" \
        --tokens /run/secrets/kcache_tokens >>"$work/server.log" 2>&1 &
    server_pid=$!; pids+=("$server_pid")
    local ready=0
    for _ in $(seq 200); do
      if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
      sleep 0.05
    done
    ((ready)) || { tail -20 "$work/server.log"; fail "server container did not become ready"; }
    # Disk storage: the server must hold the flock on the volume's LOCK (the
    # host side of the bind mount). buildah's chroot isolation now and then
    # starts a container without its volume (the server then uses the
    # image's own empty /var/lib/kcache, and a restart "loses" the entry);
    # that is the harness, not the image: say so and start it again.
    if [[ $1 != disk:* ]] || ! flock -n "$work/kcache-data/LOCK" true 2>/dev/null; then
      say "server ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms ($1)"; return
    fi
    say "the container started without its volume mounted (buildah, try $try); starting it again"
    stop_server
  done
  fail "the server container never had its volume mounted"
}
# SIGTERM goes to the server itself: `buildah run` answers a signal by
# killing its child, which is not what an engine's `docker stop` does.
stop_server() {
  local spid
  spid=$(pgrep -f "^/usr/local/bin/kcache-server --listen 0.0.0.0:$port ") || fail "no server process"
  kill -TERM "$spid"
  wait "$server_pid" || fail "server exited non-zero on SIGTERM"
  grep -q "stopped" "$work/server.log" || fail "no clean drain in the server log"
}

start_server "redis://127.0.0.1:$rport/0"
ss -ltn | grep -q "0.0.0.0:$port " || fail "the server does not listen on 0.0.0.0"

say "authenticated PUT and GET of a real bundle"
key=$("$PY" - "$work/bundle" <<'EOF'
import sys
sys.path.insert(0, "tests/python/server")
from server_harness import make_bundle, new_key  # the bundles the server tests upload
key = new_key()
open(sys.argv[1], "wb").write(make_bundle(key, payload=b"x" * 4096))
print(key)
EOF
)
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary @"$work/bundle" "http://127.0.0.1:$port/v1/artifacts/$key")
[[ $code == 401 ]] || fail "unauthenticated PUT answered $code, not 401"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $read" --data-binary @"$work/bundle" "http://127.0.0.1:$port/v1/artifacts/$key")
[[ $code == 403 ]] || fail "read-token PUT answered $code, not 403"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $write" --data-binary @"$work/bundle" "http://127.0.0.1:$port/v1/artifacts/$key")
[[ $code == 201 ]] || fail "PUT answered $code"
get_matches() { curl -fsS -H "Authorization: Bearer $read" "http://127.0.0.1:$port/v1/artifacts/$key" | cmp -s - "$work/bundle"; }
get_matches || fail "GET did not return the bundle"
curl -fsS -H "Authorization: Bearer $read" "http://127.0.0.1:$port/v1/stats" | "$PY" -c \
  'import json,sys; s=json.load(sys.stdin); assert s["storage"]["entries"] == 1, s; print("smoke: stats:", s["storage"])'

say "the CLI inside the container"
buildah run --isolation chroot -v "$work/secrets/tokens:/run/secrets/kcache_tokens:ro" "$server_ctr" -- \
  sh -c "KCACHE_URL=http://127.0.0.1:$port KCACHE_TOKEN=$read /usr/local/bin/kcache ls" | grep -q "${key:0:12}" \
  || fail "kcache ls inside the container did not list the entry"

say "server container restart (SIGTERM drain), then Redis restart (AOF)"
stop_server
start_server "redis://127.0.0.1:$rport/0"
get_matches || fail "entry lost across a server restart"
kill -TERM "$(pgrep -f "redis-server 127.0.0.1:$rport")"; wait "$redis_pid" || true
start_redis
get_matches || fail "entry lost across a Redis restart"
stop_server

say "disk profile: the volume survives a restart"
start_server "disk:/var/lib/kcache"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $write" --data-binary @"$work/bundle" "http://127.0.0.1:$port/v1/artifacts/$key")
[[ $code == 201 ]] || fail "disk PUT answered $code"
# The object must be on the host side of the volume; if not, the bind mount
# was not in place for this container run (seen once with buildah's chroot
# isolation: the server wrote into the container's own /var/lib/kcache).
[[ -e $work/kcache-data/objects/${key:0:2}/$key ]] || fail "the PUT did not reach the mounted volume"
stop_server
start_server "disk:/var/lib/kcache"
get_matches || fail "entry lost across a restart on the disk volume"
stop_server
say "all checks passed"
