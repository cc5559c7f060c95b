"""scripts/check_py_layers.py on the package (clean), and on copies with a
planted upward import, a planted cycle and a planted import into the torch
adaptor (each reported): the check can fail."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "check_py_layers.py"
PACKAGE = ROOT / "compile" / "kcache"


def _check(package: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(package)], capture_output=True, text=True)


def test_the_package_has_no_upward_import_and_no_cycle():
    out = _check(PACKAGE)
    assert out.returncode == 0, out.stdout
    assert "no upward import, no cycle" in out.stdout


@pytest.mark.parametrize("file,line,expect", [
    ("keys/make.py", "from kcache.api import stats", "imports kcache.api (api), a higher layer"),
    ("traced/backend.py", "from kcache.precompiled import region", "(precompiled), a peer"),
    ("_torch_adaptor/hooks.py", "from kcache import settings", "(settings), a higher layer"),
    ("precompiled/spec.py", "    from kcache.precompiled import region", "import cycle among: "),
    ("api/regions.py", "from . import regional", "import cycle among: kcache.api.regional, kcache.api.regions"),
])
def test_a_planted_mistake_is_reported(tmp_path, file, line, expect):
    copy = tmp_path / "kcache"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / file
    body = target.read_text()
    if line.startswith("    "):  # inside a function: imports there count too
        body += f"\n\ndef _planted():\n{line}\n"
    else:
        body += f"\n{line}\n"
    target.write_text(body)
    out = _check(copy)
    assert out.returncode == 1, out.stdout
    assert expect in out.stdout, out.stdout
