#!/usr/bin/env bash
# The client wheel in a clean root: a Debian 12 minbase made by debootstrap,
# with Debian's python3 and python3-venv and nothing else: no C or C++
# compiler, no -dev package (no OpenSSL, zstd or Python headers), no cmake,
# no checkout of kcache. Two phases, each a check:
#   1. no compiler: `pip install` of the wheel (scripts/wheel.sh) and the
#      pinned torch; `import kcache` and its binding, whose libssl, libcrypto
#      and libzstd resolve to the copies inside the wheel (kcache.libs/), not
#      to the root's.
#   2. torch.compile itself needs a host compiler and Python's headers on
#      the CPU (Inductor builds its C++ kernels and their wrapper with them;
#      not kcache's needs), so g++ and python3-dev from Debian, and still
#      none of kcache's build dependencies (OpenSSL, zstd, hiredis, Boost,
#      nlohmann-json headers, cmake): the training job
#      (examples/train_regional.py, GPT-2, 2 blocks) cold, then warm in a
#      fresh process with an empty node tier and Inductor cache, against the
#      host's kcache-server on its disk storage. Proven by PyTorch's counters
#      (cold: Dynamo traces, Inductor's lowering imported; warm: no trace, no
#      FX-graph or AOTAutograd miss, Inductor's compiler modules not
#      imported), the server's metrics (warm hits) and equal losses.
# The pristine root is kept as a tarball in $KCACHE_TEST_CACHE (default
# ~/.cache/kcache-test; debootstrap costs ~40 s on this machine) and unpacked
# fresh for every run; Debian's .debs for g++ and python3-dev are kept beside it.
# Needs root, debootstrap, unshare and the Debian archive.
#   tests/shell/wheel_clean_root.sh      # KEEP=1 keeps the work folder
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
PY=${PYTHON:-$root/.venv/bin/python}
cache=${KCACHE_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kcache-test}
work=$(mktemp -d /var/tmp/kcache-wheel-XXXXXX)
server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$work"
}
trap cleanup EXIT
say() { echo "wheel: $*"; }
fail() { echo "wheel: FAIL: $*" >&2; exit 1; }
torch_pin=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
tf_pin=$("$PY" -c 'import transformers; print(transformers.__version__)')

say "build (scripts/wheel.sh)"
wheel=$(scripts/wheel.sh "$work/dist")
say "$(basename "$wheel")"
[[ $wheel == *-manylinux_*_x86_64.whl ]] || fail "no manylinux tag: $wheel"

base=$cache/bookworm-minbase-python3.tar
if [[ ! -s $base ]]; then
  say "debootstrap bookworm minbase with python3 (cached in $base)"
  mkdir -p "$cache"
  debootstrap --variant=minbase --include=python3,python3-venv bookworm "$work/base" \
    http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; fail debootstrap; }
  tar -C "$work/base" -cf "$base.tmp" . && mv "$base.tmp" "$base"
  rm -rf "$work/base"
fi
rootfs=$work/rootfs
mkdir -p "$rootfs" && tar -C "$rootfs" -xf "$base"

# What the job brings: the wheel, its own script, the network's settings
# and pip's (this machine's pip finds the pinned torch on its disk).
mkdir -p "$rootfs/wheel" "$rootfs/job" "$rootfs/etc/ssl/certs" "$cache/debs/partial"
cp "$wheel" "$rootfs/wheel/"
cp examples/train_regional.py "$rootfs/job/"
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$rootfs/etc/pip.conf"
[[ -d /etc/xdg/pip ]] && mkdir -p "$rootfs/etc/xdg" && cp -r /etc/xdg/pip "$rootfs/etc/xdg/"
binds=()
for d in /opt/wheels /opt/pypi /opt/pypi-more; do [[ -d $d ]] && binds+=("$d"); done

# in_root SCRIPT: runs SCRIPT with sh in the root, in a mount namespace of
# its own (its mounts go when it ends), on the host's network.
in_root() {
  unshare --mount --propagation private bash -c '
    set -e; r=$1; shift
    mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"
    mount --bind "$KC_DEBS" "$r/var/cache/apt/archives"
    for d in $KC_BINDS; do mkdir -p "$r$d"; mount --bind -o ro "$d" "$r$d"; done
    exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      KCACHE_URL="$KC_URL" /bin/sh -ec "$1"' _ "$rootfs" "$1"
}
export KC_DEBS=$cache/debs KC_BINDS="${binds[*]}" KC_URL=""

say "1. the clean root has no compiler, no -dev package, no checkout"
in_root '
  for tool in cc gcc g++ c++ clang cmake make ninja; do
    if command -v $tool >/dev/null; then echo "found $tool"; exit 1; fi
  done
  for header in /usr/include/openssl/ssl.h /usr/include/zstd.h /usr/include/python3.11/Python.h; do
    if [ -e $header ]; then echo "found $header"; exit 1; fi
  done
  if dpkg -l | grep -E "^ii +[^ ]+-dev[: ]"; then echo "found a -dev package"; exit 1; fi
  test ! -e /wheel/CMakeLists.txt' || fail "the root is not clean"

say "1. pip install the wheel and torch==$torch_pin, transformers==$tf_pin (no compiler)"
in_root "python3 -m venv /venv
  /venv/bin/pip install -q --disable-pip-version-check /wheel/*.whl torch==$torch_pin transformers==$tf_pin" \
  > "$work/pip.log" 2>&1 || { tail -30 "$work/pip.log"; fail "pip install"; }
in_root '
  /venv/bin/python -c "
import sys, kcache, kcache._core as c
assert \"torch\" not in sys.modules, \"import kcache imported torch\"
assert c.is_key(\"0\" * 64)
print(\"kcache\", kcache.__version__, \"from\", kcache.__file__)"
  so=$(/venv/bin/python -c "import kcache._core as c; print(c.__file__)")
  libs=$(dirname "$so")/../kcache.libs
  for lib in libssl libcrypto libzstd; do
    line=$(ldd "$so" | grep "$lib")
    case "$line" in *kcache.libs/$lib-*) echo "  $line";; *) echo "$lib not from the wheel: $line"; exit 1;; esac
  done' || fail "import kcache from the wheel"

mkdir -p "$work/server-data"
build/dev/server/kcache-server --listen 127.0.0.1:0 --storage "disk:$work/server-data" \
  > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 100); do grep -q '^listening on' "$work/server.out" && break; sleep 0.1; done
addr=$(awk '/^listening on/ {print $3}' "$work/server.out")
[[ -n $addr ]] || { cat "$work/server.log"; fail "kcache-server did not start"; }
export KC_URL="http://$addr"
say "kcache-server on $KC_URL (the host's, disk storage)"

say "2. g++ and Python's headers from Debian (Inductor's own needs on the CPU), none of kcache's build dependencies"
in_root 'apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get -y -qq install --no-install-recommends g++ python3-dev >/dev/null
  for p in libssl-dev libzstd-dev libhiredis-dev nlohmann-json3-dev libboost1.81-dev libcli11-dev libspdlog-dev cmake ninja-build; do
    if dpkg -s $p >/dev/null 2>&1; then echo "found $p"; exit 1; fi
  done
  test ! -e /usr/include/openssl/ssl.h && test ! -e /usr/include/zstd.h' > "$work/apt.log" 2>&1 \
  || { tail -30 "$work/apt.log"; fail "apt-get install g++ python3-dev"; }

# KCACHE_COLD_START=wait: the cold job compiles in its own process, whose
# trace and code generation the checks below count (the background default
# is tested in tests/python/compile/test_cold_background.py).
job() {  # job NAME: one training process, empty node tier and Inductor cache
  in_root "cd /job && KCACHE_LOCAL_DIR=/tmp/node-$1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-$1 \
    KCACHE_URL=$KC_URL KCACHE_PRECOMPILED=1 KCACHE_COLD_START=wait \
    /venv/bin/python train_regional.py --model gpt2 --layers 2 --steps 2" 2> "$work/job-$1.log" | tail -1
}
say "2. cold: the job compiles each distinct region once and uploads it"
cold=$(job cold) || { tail -30 "$work/job-cold.log"; fail "cold job"; }
hits_before=$(curl -fsS "$KC_URL/metrics" | awk '$1 ~ /^kcache_cache_hits_total/ {s += $2} END {print s + 0}')
say "2. warm: a fresh process in the clean root loads every region from the server"
warm=$(job warm) || { tail -30 "$work/job-warm.log"; fail "warm job"; }
hits_after=$(curl -fsS "$KC_URL/metrics" | awk '$1 ~ /^kcache_cache_hits_total/ {s += $2} END {print s + 0}')
"$PY" - "$cold" "$warm" "$hits_before" "$hits_after" <<'PY' || fail "the warm start through the wheel"
import json, sys
c, w = (json.loads(a) for a in sys.argv[1:3])
before, after = (float(x) for x in sys.argv[3:5])
ck, wk = c["kcache"], w["kcache"]
# Positive control: the cold run traced and ran Inductor's code generation.
assert ck["compiles"] > 0 and c["dynamo_traced"], ("cold compiled nothing", ck)
assert "torch._inductor.lowering" in c["compiler_modules"], c["compiler_modules"]
# Warm: every region from the server, nothing traced, Inductor's compiler
# not even imported, no FX-graph or AOTAutograd cache miss.
assert wk["compiles"] == 0 and wk["hits_server"] > 0 and wk["precompiled_blocks"] > 0, wk
assert not w["dynamo_traced"], w["dynamo_traced"]
assert w["compiler_modules"] == [], w["compiler_modules"]
assert w["inductor"].get("fxgraph_cache_miss", 0) == 0, w["inductor"]
assert w["aot_autograd"].get("autograd_cache_miss", 0) == 0, w["aot_autograd"]
assert after > before, ("the server counted no hit", before, after)
assert c["losses"] == w["losses"], (c["losses"], w["losses"])
print(f"wheel: cold {c['breakdown']['to_first_step_s']:.1f} s to the first step, {ck['compiles']} regions compiled, "
      f"Dynamo traces {len(c['dynamo_traced'])}; warm {w['breakdown']['to_first_step_s']:.1f} s, "
      f"{wk['hits_server']} regions from the server (server hits {before:g} -> {after:g}), "
      f"Dynamo traces 0, Inductor's compiler not imported; same losses")
PY
say "ok"
