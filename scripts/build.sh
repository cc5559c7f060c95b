#!/usr/bin/env bash
# Builds the C++ core and tests (build/dev) and installs the Python package
# kcache into .venv. Incremental: ccache and Ninja keep rebuilds cheap.
#   BUILD_DIR   build directory (default build/dev)
#   SANITIZE=1  AddressSanitizer + UBSan build (tests only, no Python)
#   SANITIZE=thread  ThreadSanitizer build (tests only, no Python)
#   TORCH_PYTHON  the venv python whose torch the libtorch example links
#               (default .venv; bench/compat builds one per torch release)
#   TARGETS     ninja targets to build (default: all); with TARGETS the
#               Python package is not installed
#   EXTRA_CMAKE_ARGS  more -D options (bench/compat: a CUDA build of torch
#               needs its CUDA toolkit and nvrtc named)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build/dev}
jobs=${JOBS:-2}
py=${TORCH_PYTHON:-$root/.venv/bin/python}
# ccache: hash paths relative to the checkout, so a fresh clone (CI) reuses
# the objects an earlier checkout built.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1

args=(-G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCACHE_BUILD_TESTS=ON)
# Warnings are errors in the plain build. Not under the sanitizers: their
# instrumentation makes GCC 12 report false -Wmaybe-uninitialized inside
# libstdc++ (std::regex's std::function under ASan), so there they stay
# warnings, printed.
if [[ ${SANITIZE:-0} == 0 ]]; then args+=(-DKCACHE_WERROR=ON); else args+=(-DKCACHE_WERROR=OFF); fi
if [[ ${SANITIZE:-0} == 1 ]]; then
  args+=(-DKCACHE_SANITIZE=ON -DKCACHE_BUILD_PYTHON=OFF)
elif [[ ${SANITIZE:-0} == thread ]]; then
  args+=(-DKCACHE_TSAN=ON -DKCACHE_BUILD_PYTHON=OFF)
else
  # The libtorch example (examples/cpp_regions) links the libtorch inside
  # the pinned torch wheel.
  args+=(-DKCACHE_BUILD_PYTHON=ON -DPython_EXECUTABLE="$py"
         -Dpybind11_DIR="$("$py" -m pybind11 --cmakedir)"
         -DKCACHE_BUILD_TORCH_EXAMPLES=ON
         -DTorch_DIR="$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')/Torch")
fi
# shellcheck disable=SC2206  # a list of -D options
args+=(${EXTRA_CMAKE_ARGS:-})
cmake "${args[@]}" >/dev/null
# shellcheck disable=SC2086  # TARGETS is a list of target names
ninja -C "$build" -j"$jobs" ${TARGETS:-}

if [[ ${SANITIZE:-0} == 0 && -z ${TARGETS:-} ]]; then
  # The real packaging path (scikit-build-core), not a copied .so.
  "$py" -m pip install -q --disable-pip-version-check --no-build-isolation .
fi
