#!/usr/bin/env bash
# The GPU check (issue 12): builds kcache on the GPU machine from carried
# Debian packages, starts a kcache-server on loopback, trains a GPT-2
# configuration with kcache.compile_regions cold in one process and warm in
# a fresh one, and prints compile times, step times vs eager, PyTorch's
# cache counters, Triton kernels compiled vs restored, and the cubin archs
# the bundles record. Under five minutes on one H200. bench/gpu/README.md
# has the exact device call; bench/gpu/rehearsal.log is a CPU rehearsal.
#
#   bench/gpu_check.sh          the GPU check (12-block GPT-2, hidden 768, bf16)
#   bench/gpu_check.sh --cpu    the same steps on CPU with a tiny config (rehearsal)
# Environment:
#   PYTHON   the Python with torch, Triton, transformers (default python3)
#   DEBS     folder of .deb files from bench/gpu/fetch_debs.sh (default .gpu-debs)
#   WORK     scratch folder (default build/gpu-check; wiped first)
#   OUT      where the logs and JSON go as well (the device tool's $OUT)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cpu=0
[[ ${1:-} == --cpu ]] && cpu=1
py=${PYTHON:-}
if [[ -z $py ]]; then  # the Python that has torch
  for candidate in python3 python; do
    if command -v $candidate >/dev/null && $candidate -c "import torch" 2>/dev/null; then py=$candidate; break; fi
  done
fi
[[ -n $py ]] || { echo "gpu_check: no Python with torch (set PYTHON)" >&2; exit 1; }
debs=${DEBS:-$root/.gpu-debs}
work=${WORK:-$root/build/gpu-check}
out=${OUT:-$work/out}
t_start=$(date +%s)
stamp() { echo "[gpu_check +$(( $(date +%s) - t_start ))s] $*"; }

rm -rf "$work"
mkdir -p "$work" "$out"
prefix=$work/prefix
multi=$prefix/usr/lib/x86_64-linux-gnu

# ---- 1. C++ dependencies: carried .debs in a private prefix, not the system's
stamp "extracting $(ls "$debs"/*.deb 2>/dev/null | wc -l) packages from $debs"
"$py" bench/gpu/undeb.py "$debs" "$prefix"
export PATH=$PATH:$prefix/usr/bin   # carried ninja / pkg-config only where missing
export PKG_CONFIG_LIBDIR=$multi/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$prefix
export CPLUS_INCLUDE_PATH=$prefix/usr/include/x86_64-linux-gnu:$prefix/usr/include
export LD_LIBRARY_PATH=$multi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix/usr"
            -DOPENSSL_ROOT_DIR="$prefix/usr" -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON)
for tool in cmake ninja pkg-config c++ "$py"; do
  command -v "$tool" >/dev/null || { echo "gpu_check: $tool not found" >&2; exit 1; }
done
stamp "toolchain: $(cmake --version | head -1), ninja $(ninja --version), $(c++ --version | head -1), $("$py" --version)"

# ---- 2. kcache-server (CMake) and the binding (pip + scikit-build-core,
# --target), built side by side
jobs=$(nproc)
cmake -S . -B "$work/build" "${cmake_args[@]}" -DKCACHE_BUILD_TESTS=OFF -DKCACHE_BUILD_PYTHON=OFF \
  >"$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
grep -E "Found (OpenSSL|PkgConfig)|Found (libzstd|hiredis)|Boost" "$out/cmake.log" | sed 's/^/  /' || true
ninja -C "$work/build" -j"$jobs" kcache-server >"$out/ninja.log" 2>&1 &
ninja_pid=$!
CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$prefix/usr -DOPENSSL_ROOT_DIR=$prefix/usr -Dpybind11_DIR=$("$py" -m pybind11 --cmakedir)" \
  "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --target "$work/site" --config-settings=build-dir="$work/pybuild" . >"$out/pip.log" 2>&1 \
  || { tail -40 "$out/pip.log"; kill $ninja_pid; exit 1; }
export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH}
stamp "built the binding: $("$py" -c 'import kcache._core as c; print(c.__file__)')"
wait $ninja_pid || { tail -40 "$out/ninja.log"; exit 1; }
server_bin=$work/build/server/kcache-server
stamp "built kcache-server; its libraries: $(ldd "$server_bin" | grep -E 'ssl|zstd|hiredis|spdlog' | awk '{print $3}' | tr '\n' ' ')"
stamp "the binding's libraries: $(ldd "$work"/site/kcache/_core*.so | grep -E 'ssl|crypto|zstd' | awk '{print $3}' | tr '\n' ' ')"

# ---- 3. torch version: the adaptor is pinned and fails loudly; the check runs
# on the GPU machine's torch with the documented override, and says so.
tested=$("$py" -c "from kcache._torch_adaptor import TESTED_TORCH; print(TESTED_TORCH)")
have=$("$py" -c "import torch; print(torch.__version__.split('+')[0])")
if [[ $have != "$tested" ]]; then
  export KCACHE_ALLOW_UNTESTED_TORCH=1
  stamp "torch $have, adaptor tested with $tested: running with KCACHE_ALLOW_UNTESTED_TORCH=1"
fi

# ---- 4. a kcache-server on a loopback port
env -u KCACHE_URL "$server_bin" --listen 127.0.0.1:0 --storage "disk:$work/server-data" \
  >"$work/server.out" 2>"$out/server.log" &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "^listening on" "$work/server.out" 2>/dev/null && break; sleep 0.1; done
export KCACHE_URL=http://$(awk '/^listening on/{print $3}' "$work/server.out")
stamp "kcache-server at $KCACHE_URL"

# ---- 5. cold and warm, each in a fresh process with fresh local caches
if ((cpu)); then
  size=(--cpu --layers 2 --hidden 32 --heads 2 --batch 2 --seq 32 --dtype float32 --steps 3)
else
  size=(--layers 12 --hidden 768 --heads 12 --batch 8 --seq 256 --dtype bfloat16 --steps 10)
fi
run_phase() {
  local phase=$1 limit=$2; shift 2
  KCACHE_LOCAL_DIR=$work/node-$phase TORCHINDUCTOR_CACHE_DIR=$work/inductor-$phase \
  TRITON_CACHE_DIR=$work/triton-$phase \
    timeout "$limit" "$py" bench/gpu/check.py job --phase "$phase" "${size[@]}" "$@" \
    >"$out/$phase.json" 2>"$out/$phase.log" || { tail -30 "$out/$phase.log"; exit 1; }
  stamp "$phase done"
}
run_phase cold 180 --eager
run_phase warm 120
"$py" bench/gpu/check.py report "$out/cold.json" "$out/warm.json" | tee "$out/report.txt"
stamp "total"
