#!/usr/bin/env bash
# A venv for one supported torch release beside .venv: that torch (pinned
# exactly), the current transformers and accelerate, the test dependencies,
# and kcache built into it (build/dev's C++ core, the Python package). The
# compatibility stage (bench/compat/run.sh) runs the compile-integration
# tests in it; docs/torch-support.md has the matrix.
#   bench/compat/setup-torch.sh 2.14.1 [DIR]   (default DIR: .venv-torch2.14)
#   bench/compat/setup-torch.sh 2.15.0
# torch 2.14.1 is a CUDA build (it runs on the CPU, 5.6 GB in the venv).
# Where pip caps torch at 2.14.1 (a constraint file in pip's site config),
# 2.15.0 is asked for with that constraint set aside (PIP_CONSTRAINT), and
# pinned, so pip fetches exactly that build and nothing looser.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
torch_version=${1:?usage: setup-torch.sh TORCH_VERSION [DIR]}
release=${torch_version%.*}
venv=${2:-$root/.venv-torch$release}
want=("torch==$torch_version" "transformers==${TRANSFORMERS:-5.25.0}" "accelerate==${ACCELERATE:-1.16.0}"
      pybind11 scikit-build-core pytest "pytest-xdist==3.8.0" redis matplotlib)
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import torch, transformers, accelerate, pytest, xdist; assert torch.__version__.startswith('$torch_version')" 2>/dev/null; then
  PIP_CONSTRAINT=/dev/null "$venv/bin/pip" install -q --disable-pip-version-check "${want[@]}"
fi
(cd "$root" && "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation .)
"$venv/bin/python" -c "import torch, transformers, accelerate, kcache; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__)"
