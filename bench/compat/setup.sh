#!/usr/bin/env bash
# .venv-latest: the project's .venv (torch 2.13 CPU, kcache, pytest) with
# the newest transformers and accelerate on top, for bench/compat/run.sh.
# The new venv sees .venv's packages through a .pth file and installs its own
# transformers and accelerate, which come first on sys.path; torch stays at
# the pinned 2.13 (pinned here too, so pip never fetches another build).
#   TRANSFORMERS=5.24.0 ACCELERATE=1.15.0 (defaults: the newest releases tried)
#   bench/compat/setup.sh [DIR]   (default: .venv-latest in this checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${1:-$root/.venv-latest}
"$root/bench/overlay_venv.sh" "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "torch==2.13.0" \
  "transformers==${TRANSFORMERS:-5.24.0}" "accelerate==${ACCELERATE:-1.15.0}"
"$venv/bin/python" -c "import torch, transformers, accelerate; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__)"
