#!/usr/bin/env bash
# Builds the client wheel: kcache's Python package and its binding
# (kcache._core), built by scikit-build-core, then repaired by auditwheel so
# that the libraries it links beyond glibc and libstdc++ (libssl, libcrypto,
# libzstd) travel inside it, in kcache.libs/. The result installs with pip
# on a machine with no compiler, no -dev package and no checkout
# (docs/install.md; tests/shell/wheel_clean_root.sh proves it).
#   scripts/wheel.sh [OUT_DIR]     (default dist/; prints the wheel's path)
# The platform tag is the oldest glibc whose symbols the binding uses
# (auditwheel show): manylinux_2_34_x86_64 when built on Debian 12.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${1:-$root/dist}
py=${PYTHON:-$root/.venv/bin/python}
bin=$(dirname "$py")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# As pip builds it for a user: in an isolated build environment with the
# build tools pyproject.toml names; build/<wheel tag>/ and ccache make a
# rebuild of the binding seconds.
"$py" -m pip wheel -q --disable-pip-version-check --no-deps -w "$work/raw" . >&2
raw=$(ls "$work"/raw/kcache-*.whl)
# The tag auditwheel finds the binding consistent with, from the symbol
# versions it uses; repair grafts the non-manylinux libraries under it.
plat=$(PATH=$bin:$PATH "$bin/auditwheel" show "$raw" 2>/dev/null \
       | tr -d '\n' | sed -n 's/.*constrains the platform tag to "\([^"]*\)".*/\1/p')
[[ -n $plat ]] || { PATH=$bin:$PATH "$bin/auditwheel" show "$raw" >&2; echo "wheel: no manylinux tag" >&2; exit 1; }
mkdir -p "$out"
PATH=$bin:$PATH "$bin/auditwheel" repair --plat "$plat" -w "$out" "$raw" > "$work/repair.log" 2>&1 \
  || { cat "$work/repair.log" >&2; echo "wheel: auditwheel repair failed" >&2; exit 1; }
ls -t "$out"/kcache-*-"$plat".whl | head -1
