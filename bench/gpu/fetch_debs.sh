#!/usr/bin/env bash
# Downloads (does not install) the Debian packages kcache's C++ build needs
# into .gpu-debs/, for a machine without network or apt (the GPU machine):
# bench/gpu_check.sh extracts them into a private prefix there and points
# CMake and pkg-config at it. Run here, where apt works; then name
# .gpu-debs in the device tool's `carry` (bench/gpu/README.md).
#   OUT   target folder (default .gpu-debs)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/.gpu-debs}
mkdir -p "$out"
# Headers and link-time libraries (the -dev packages) and the runtime
# libraries they point at (the binaries load them from the prefix through
# LD_LIBRARY_PATH); pkgconf and ninja in case the machine lacks them.
packages=(
  libboost1.81-dev
  libssl-dev libssl3
  libzstd-dev libzstd1
  libhiredis-dev libhiredis0.14
  nlohmann-json3-dev libcli11-dev
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  pkgconf pkgconf-bin libpkgconf3
  ninja-build
)
cd "$out"
apt-get download "${packages[@]}" >/dev/null
ls -1 *.deb | wc -l | xargs echo "fetch_debs: packages in $out:"
du -sh "$out" | cut -f1 | xargs echo "fetch_debs: size"
