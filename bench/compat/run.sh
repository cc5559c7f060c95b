#!/usr/bin/env bash
# The compile-integration tests in another environment. By default
# .venv-previous (bench/compat/setup.sh: torch 2.13 with the previous pins of
# transformers and accelerate); with COMPAT_VENV, a venv of a torch release
# (bench/compat/setup-torch.sh, or the project's .venv for 2.13). Writes
# bench/compat/results-previous.json (versions, passed, failed, each
# failure's message) and pytest-previous.log, or
# results-torch<release>.json and pytest-torch<release>.log for COMPAT_VENV;
# docs/STATUS.md and docs/torch-support.md cite them.
#   bench/compat/setup.sh && bench/compat/run.sh
#   bench/compat/setup-torch.sh 2.14.1 && COMPAT_VENV=.venv-torch2.14 bench/compat/run.sh
#   bench/compat/run.sh tests/python/test_x.py   # a subset: results-subset.json, pytest-subset.log
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tests=(tests/python/compile/test_accelerate.py tests/python/compile/test_regions.py tests/python/compile/test_region_keys.py
       tests/python/compile/test_precompiled_blocks.py tests/python/compile/test_precompiled_warm.py
       tests/python/compile/test_cold_warm.py
       tests/python/compile/test_accelerate_distributed.py tests/python/compile/test_worker_hooked.py
       tests/python/compile/test_shared_kernels.py)
name=results-previous log=pytest-previous
if [[ -n ${COMPAT_VENV:-} ]]; then
  py=$COMPAT_VENV/bin/python
  release=$("$py" -c 'import torch; print(".".join(torch.__version__.split(".")[:2]))')
  # The RESP endpoint under PyTorch's own remote caches, stock torch.compile;
  # the guard table of this release; AOTInductor regions run by the libtorch
  # program built against this release's libtorch (build/torch<release>).
  tests+=(tests/python/compile/test_resp_torch.py tests/python/compile/test_guard_table.py tests/python/compile/test_torch_adaptor.py
          tests/python/compile/test_aoti_cpp.py)
  name=results-torch$release log=pytest-torch$release
  build_dir=$root/build/torch$release
  cmake_extra=()
  if [[ -n $("$py" -c 'import torch; print(torch.version.cuda or "")') ]]; then
    # A CUDA build of torch: its CMake config asks for the CUDA toolkit
    # ($CUDA_HOME, default /usr/local/cuda) and for the nvrtc the wheel brought (nvidia/cu*/lib).
    cuda_root=${CUDA_HOME:-/usr/local/cuda}
    nvrtc=$("$py" -c 'import glob, os, torch; print((sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cu*", "lib", "libnvrtc.so*"))) or [""])[0])')
    cmake_extra=("-DCUDA_TOOLKIT_ROOT_DIR=$cuda_root" "-DCMAKE_CUDA_COMPILER=$cuda_root/bin/nvcc"
                 "-DCUDA_nvrtc_LIBRARY=$nvrtc")
  fi
  EXTRA_CMAKE_ARGS="${cmake_extra[*]}" TORCH_PYTHON=$py BUILD_DIR=$build_dir TARGETS=kcache-regions-run \
    scripts/build.sh > "bench/compat/build-torch$release.log" 2>&1 \
    || { tail -20 "bench/compat/build-torch$release.log"; echo "compat: the libtorch program did not build"; exit 1; }
else
  py=.venv-previous/bin/python
  [[ -x $py ]] || bench/compat/setup.sh
fi
if (($#)); then tests=("$@") name=$name-subset log=$log-subset; fi
junit=$(mktemp --suffix=.xml)
# KCACHE_BUILD_DIR: where test_aoti_cpp finds the libtorch program.
KCACHE_BUILD_DIR="${build_dir:-$root/build/dev}" "$py" -m pytest -q -ra -n 2 "${tests[@]}" \
  --junitxml="$junit" > "bench/compat/$log.log" 2>&1
rc=$?
"$py" - "$junit" "$rc" "$*" <<'PY' > "bench/compat/$name.json"
import json, os, sys, time, importlib.metadata as md
import xml.etree.ElementTree as ET
cases = list(ET.parse(sys.argv[1]).iter("testcase"))
def outcome(c):
    for tag in ("failure", "error", "skipped"):
        e = c.find(tag)
        if e is not None:
            return tag, (e.get("message") or "")[:500]
    return "passed", ""
rows = [(c.get("classname") + "::" + c.get("name"), *outcome(c)) for c in cases]
print(json.dumps({
    "date": time.strftime("%Y-%m-%d %H:%M"), "command": ((f"COMPAT_VENV={os.environ['COMPAT_VENV']} " if os.environ.get("COMPAT_VENV") else "")
                + "bench/compat/run.sh " + sys.argv[3]).strip(),
    "pytest_rc": int(sys.argv[2]),
    "versions": {k: md.version(k) for k in ("torch", "transformers", "accelerate")},
    "kcache_path": __import__("kcache._torch_adaptor", fromlist=["support"]).support().path,
    "passed": sum(r[1] == "passed" for r in rows),
    "failed": [{"test": r[0], "message": r[2]} for r in rows if r[1] in ("failure", "error")],
    "skipped": [{"test": r[0], "message": r[2]} for r in rows if r[1] == "skipped"],
}, indent=1))
PY
cat "bench/compat/$name.json"
exit $rc
