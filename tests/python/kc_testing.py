"""Shared fixtures: paths, a compiler wrapper that counts host-compiler runs."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys
import urllib.request

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# tests/models is importable as `models` (the model zoo).
sys.path.insert(0, str(REPO / "tests"))


def write_cxx_wrapper(directory: pathlib.Path) -> pathlib.Path:
    """A CXX for Inductor that logs each compiler invocation to the file
    $KCACHE_TEST_CXX_LOG names, then runs g++.

    `--version` / `-v` identity queries are not logged. Each logged line is
    one real compile, preprocess or link. Its path is part of kcache's key
    (CXX) and of PyTorch's: runs meant to hit each other use the same one.
    """
    wrapper = directory / "cxx-wrapper.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in --version|-v|*" --version"*) ;; *) echo "$*" >> "$KCACHE_TEST_CXX_LOG";; esac\n'
        'exec g++ "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


@pytest.fixture
def cxx_wrapper(tmp_path):
    """(wrapper, log): write_cxx_wrapper in the test's directory, and the
    log file tests usually point $KCACHE_TEST_CXX_LOG at."""
    return write_cxx_wrapper(tmp_path), tmp_path / "cxx.log"


# Inductor compiles in the process that asked (no pool of compile-worker
# subprocesses, each importing torch): on the test machine's two cores,
# with pytest's workers running jobs side by side, a pool only adds
# processes to start. Not part of any key (kcache/env_table.py lists it as
# not affecting generated code); a test may still set its own value.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

# The environment before any test imported torch: torch sets variables in
# this process (TORCHINDUCTOR_CACHE_DIR, an address for autocast) that must
# not leak into the child processes tests start.
_BASE_ENV = dict(os.environ)


def python_env(**extra: str) -> dict[str, str]:
    env = dict(_BASE_ENV)
    env["PYTHONFAULTHANDLER"] = "1"  # a crash in a child prints its Python stack
    env.update(extra)
    return env


PYTHON = sys.executable


class ServerProcess:
    """A real kcache-server on a random loopback port (for compile-path tests)."""

    def __init__(self, tmp: pathlib.Path, storage: str | None = None, *args: str) -> None:
        binary = pathlib.Path(os.environ.get("KCACHE_SERVER_BIN", REPO / "build/dev/server/kcache-server"))
        self.log_path = tmp / "kcache-server.log"
        self.log = open(self.log_path, "wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KCACHE_")}
        self.proc = subprocess.Popen(
            [str(binary), "--listen", "127.0.0.1:0", "--storage", storage or f"disk:{tmp / 'server-data'}",
             *args], stdout=subprocess.PIPE, stderr=self.log, env=env)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"kcache-server did not start: {line!r} {self.log_path.read_text()}")
        self.url = "http://" + line.split()[-1]
        self.resp_port = None
        if "--resp-listen" in args:
            line = self.proc.stdout.readline().decode()
            if not line.startswith("resp listening on "):
                self.proc.kill()
                raise RuntimeError(f"no RESP endpoint announced: {line!r} {self.log_path.read_text()}")
            self.resp_port = int(line.split()[-1].rsplit(":", 1)[1])

    def metrics(self) -> dict[str, float]:
        """Prometheus samples without labels, summed over label sets."""
        text = urllib.request.urlopen(self.url + "/metrics", timeout=10).read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                base = name.split("{", 1)[0]
                out[base] = out.get(base, 0.0) + float(value)
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
