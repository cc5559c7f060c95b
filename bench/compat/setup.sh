#!/usr/bin/env bash
# .venv-previous: the project's .venv (torch 2.13 CPU, kcache, pytest) with
# the previous pins of transformers and accelerate on top (the test command
# runs the current ones), for bench/compat/run.sh.
# The new venv sees .venv's packages through a .pth file and installs its own
# transformers and accelerate, which come first on sys.path; torch stays at
# the pinned 2.13 (pinned here too, so pip never fetches another build).
#   TRANSFORMERS=4.57.1 ACCELERATE=1.11.0 (defaults: the project's pins before 2026-12-04)
#   bench/compat/setup.sh [DIR]   (default: .venv-previous in this checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${1:-$root/.venv-previous}
"$root/bench/overlay_venv.sh" "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "torch==2.13.0" \
  "transformers==${TRANSFORMERS:-4.57.1}" "accelerate==${ACCELERATE:-1.11.0}"
"$venv/bin/python" -c "import torch, transformers, accelerate; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__)"
