#!/usr/bin/env bash
# The compile-integration tests against the newest transformers and
# accelerate (.venv-latest, made by bench/compat/setup.sh), torch pinned at
# 2.13. Writes bench/compat/results.json (versions, passed, failed, each
# failure's message) and bench/compat/pytest.log; docs/STATUS.md cites them.
#   bench/compat/setup.sh && bench/compat/run.sh
#   bench/compat/run.sh tests/python/test_x.py   # a subset: results-subset.json, pytest-subset.log
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[[ -x .venv-latest/bin/python ]] || bench/compat/setup.sh
tests=(tests/python/test_accelerate.py tests/python/test_regions.py tests/python/test_region_keys.py
       tests/python/test_precompiled_blocks.py tests/python/test_precompiled_warm.py
       tests/python/test_cold_warm.py
       tests/python/test_accelerate_distributed.py)
name=results log=pytest
if (($#)); then tests=("$@") name=results-subset log=pytest-subset; fi
junit=$(mktemp --suffix=.xml)
KCACHE_BUILD_DIR="$root/build/dev" .venv-latest/bin/python -m pytest -q -ra "${tests[@]}" \
  --junitxml="$junit" > "bench/compat/$log.log" 2>&1
rc=$?
.venv-latest/bin/python - "$junit" "$rc" "$*" <<'PY' > "bench/compat/$name.json"
import json, sys, time, importlib.metadata as md
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
    "date": time.strftime("%Y-%m-%d %H:%M"), "command": ("bench/compat/run.sh " + sys.argv[3]).strip(),
    "pytest_rc": int(sys.argv[2]),
    "versions": {k: md.version(k) for k in ("torch", "transformers", "accelerate")},
    "passed": sum(r[1] == "passed" for r in rows),
    "failed": [{"test": r[0], "message": r[2]} for r in rows if r[1] in ("failure", "error")],
    "skipped": [{"test": r[0], "message": r[2]} for r in rows if r[1] == "skipped"],
}, indent=1))
PY
cat "bench/compat/$name.json"
exit $rc
