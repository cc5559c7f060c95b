#!/usr/bin/env bash
# Usage: bench/overlay_venv.sh DIR
# Makes DIR a virtual environment that sees the project's .venv (torch 2.13
# CPU, kcache, pytest) through a .pth file, so packages installed into DIR
# come first on sys.path and torch is never downloaded again. Used by
# bench/compat/setup.sh and bench/distributed/setup_deepspeed.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:?usage: bench/overlay_venv.sh DIR}
[[ -x "$root/.venv/bin/python" ]] || "$root/scripts/setup.sh"
python3 -m venv "$venv"
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# The base venv's real path (a worktree's .venv may be a link to another
# checkout's): the overlay may live outside this checkout.
base=$(readlink -f "$root/.venv")
"$base/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > "$site/kcache-base.pth"
