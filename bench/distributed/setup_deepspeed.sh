#!/usr/bin/env bash
# .venv-deepspeed: the project's .venv (torch 2.13 CPU, transformers,
# accelerate, kcache) plus DeepSpeed, which the project does not pin in its
# test environment. The new venv sees .venv's packages through a .pth file,
# so torch is never downloaded again (DeepSpeed is installed --no-deps: its
# own requirement on torch is unpinned and would pull a CUDA build).
#   bench/distributed/setup_deepspeed.sh [DIR]   (default: .venv-deepspeed in this checkout)
#   ACCELERATE=1.15.0 TRANSFORMERS=5.24.0 bench/distributed/setup_deepspeed.sh DIR
#     also puts those releases on top (DeepSpeed against the newest
#     Accelerate, as bench/compat's .venv-latest has them; torch stays 2.13)
# A DIR outside the checkout lets several worktrees share one; run.py then
# needs PYTHONPATH=compile (with a built _core) to use this checkout's kcache
# rather than the one installed in .venv.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${1:-$root/.venv-deepspeed}
"$root/bench/overlay_venv.sh" "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check wheel==0.48.0 setuptools==65.5.0
"$venv/bin/pip" install -q --disable-pip-version-check hjson==3.1.0 py-cpuinfo==9.0.0 msgpack==1.2.4 \
  pydantic==2.14.4 einops==0.8.2 ninja==1.13.2
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation deepspeed==0.19.8
if [[ -n ${ACCELERATE:-}${TRANSFORMERS:-} ]]; then
  "$venv/bin/pip" install -q --disable-pip-version-check "torch==2.13.0" \
    ${TRANSFORMERS:+"transformers==$TRANSFORMERS"} ${ACCELERATE:+"accelerate==$ACCELERATE"}
fi
"$venv/bin/python" -c "import deepspeed, torch, accelerate, transformers; print('deepspeed', deepspeed.__version__, 'torch', torch.__version__, 'accelerate', accelerate.__version__, 'transformers', transformers.__version__)"
