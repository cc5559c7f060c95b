"""Shared fixtures: paths, a compiler wrapper that counts host-compiler runs."""

from __future__ import annotations

import os
import pathlib
import stat
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# tests/models is importable as `models` (the model zoo).
sys.path.insert(0, str(REPO / "tests"))


@pytest.fixture
def cxx_wrapper(tmp_path):
    """A CXX for Inductor that logs each compiler invocation, then runs g++.

    `--version` / `-v` identity queries are not logged. Each logged line is
    one real compile, preprocess or link.
    """
    log = tmp_path / "cxx.log"
    wrapper = tmp_path / "cxx-wrapper.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in --version|-v|*" --version"*) ;; *) echo "$*" >> "$KCACHE_TEST_CXX_LOG";; esac\n'
        'exec g++ "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper, log


def python_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONFAULTHANDLER"] = "1"  # a crash in a child prints its Python stack
    env.update(extra)
    return env


PYTHON = sys.executable
