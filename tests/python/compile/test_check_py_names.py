"""scripts/check_py_names.py on the tree (clean), and on planted files:
an imported name a function, class or other import rebinds is reported
(clean-clone-40: `run_job` imported, then defined); rebinding the same
thing, and imports inside blocks, are not."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "check_py_names.py"


def check(*dirs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, dirs)], capture_output=True, text=True,
                          timeout=120)


def test_the_tree_binds_no_module_level_name_twice():
    out = check()
    assert out.returncode == 0, out.stdout


@pytest.mark.parametrize("source,line", [
    ("from harness.jobs import run_job\n\n\ndef run_job(env):\n    pass\n", 4),
    ("import json\n\n\nclass json:\n    pass\n", 4),
    ("from a import x\nfrom b import x\n", 2),
    ("import os.path as p\nfrom q import p\n", 2),
])
def test_a_name_bound_twice_is_reported(tmp_path, source, line):
    (tmp_path / "m.py").write_text(source)
    out = check(tmp_path)
    assert out.returncode == 1 and f"m.py:{line}:" in out.stdout, out.stdout


@pytest.mark.parametrize("source", [
    "import torch\nimport torch._dynamo\n",  # both bind the package torch
    "from a import x\nfrom a import x\n",
    "try:\n    import tomllib\nexcept ImportError:\n    import tomli as tomllib\n",
    "import json\n\n\ndef f(json):\n    return json\n",  # a parameter, not a module-level name
])
def test_the_same_binding_and_fallbacks_are_not(tmp_path, source):
    (tmp_path / "m.py").write_text(source)
    out = check(tmp_path)
    assert out.returncode == 0, out.stdout
