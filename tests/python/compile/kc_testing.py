"""Shared fixtures: paths, a compiler wrapper that counts host-compiler runs."""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import urllib.request

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
# tests/models is importable as `models` (the model zoo); tests/python holds
# the harness package (also for the job scripts run as subprocesses).
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "python"))

import harness.server  # noqa: E402


def write_cxx_wrapper(directory: pathlib.Path) -> pathlib.Path:
    """A CXX for Inductor that logs each compiler invocation to the file
    $KCACHE_TEST_CXX_LOG names, then runs g++.

    `--version` / `-v` identity queries are not logged. Each logged line is
    one real compile, preprocess or link. While the file
    $KCACHE_TEST_CXX_GATE names exists, each logged run waits before g++
    (a test holds a compile in progress that way: test_cold_background.py);
    with $KCACHE_TEST_CXX_GATE_MATCH set, only the runs whose arguments
    contain it wait (test_shared_kernels.py holds a kernel library's build,
    not the header preprocessing before it). Its path is part of kcache's key
    (CXX) and of PyTorch's: runs meant to hit each other use the same one.
    """
    wrapper = directory / "cxx-wrapper.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in --version|-v|*" --version"*) ;; *) echo "$*" >> "$KCACHE_TEST_CXX_LOG"\n'
        '  case "$*" in *"$KCACHE_TEST_CXX_GATE_MATCH"*)\n'
        '    while [ -n "$KCACHE_TEST_CXX_GATE" ] && [ -e "$KCACHE_TEST_CXX_GATE" ]; do sleep 0.1; done;; esac;;\n'
        'esac\n'
        'exec g++ "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


def libraries_built(log: pathlib.Path) -> list[str]:
    """The kernel libraries (Inductor's <hash>.main.so) the host compiler
    wrote, by file name, from a CXX wrapper's log (write_cxx_wrapper)."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        args = line.split()
        out += [args[i + 1].rsplit("/", 1)[-1] for i, a in enumerate(args[:-1])
                if a == "-o" and args[i + 1].endswith(".main.so")]
    return out


@pytest.fixture
def cxx_wrapper(tmp_path):
    """(wrapper, log): the session's CXX wrapper (session_cxx_wrapper), and
    the test's own log file tests usually point $KCACHE_TEST_CXX_LOG at."""
    return HOST_FACTS["wrapper"] or write_cxx_wrapper(tmp_path), tmp_path / "cxx.log"


# Inductor compiles in the process that asked (no pool of compile-worker
# subprocesses, each importing torch): on the test machine's two cores,
# with pytest's workers running jobs side by side, a pool only adds
# processes to start. Not part of any key (kcache/keys/env_table.py lists it as
# not affecting generated code); a test may still set its own value.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

# The environment before any test imported torch: torch sets variables in
# this process (TORCHINDUCTOR_CACHE_DIR, an address for autocast) that must
# not leak into the child processes tests start.
_BASE_ENV = dict(os.environ)


def python_env(**extra: str) -> dict[str, str]:
    """This process's environment before torch, plus `extra`; a node
    directory named in KCACHE_LOCAL_DIR starts with the session's host facts
    (seed_node) unless the test is marked fresh_node."""
    env = dict(_BASE_ENV)
    env["PYTHONFAULTHANDLER"] = "1"  # a crash in a child prints its Python stack
    env.update(extra)
    seed_env(env)
    return env


# Host facts (kcache/host_facts.py: Inductor's ISA check verdicts and what
# -march=native means) found once per pytest session, for both compilers
# the tests use (the session's CXX wrapper and plain g++): a fresh node
# directory would otherwise make its first process build and check
# Inductor's ISA probes, ~16 s of g++ on this machine, in some 40 tests
# whose proof is not about a fresh node. Tests that prove what a fresh node
# does (tests/python/conftest.py: the fresh_node marker) start empty.
HOST_FACTS: dict[str, pathlib.Path | bool | None] = {"dir": None, "wrapper": None, "seed": True}


def seed_node(node: pathlib.Path) -> None:
    """Copies the session's host-fact records into a node directory (not in
    a test marked fresh_node)."""
    facts = HOST_FACTS["dir"]
    if facts is None or not HOST_FACTS["seed"]:
        return
    host = node / "host"
    host.mkdir(parents=True, exist_ok=True, mode=0o700)
    for record in facts.glob("host/*.json"):
        if not (host / record.name).exists():
            shutil.copyfile(record, host / record.name)


def seed_inductor(cache_dir: pathlib.Path, wrapper: bool = True) -> None:
    """Copies the session's built ISA probes (for the CXX wrapper, or for
    plain g++) into an Inductor cache directory, where Inductor looks for
    them before building its own: for processes of stock torch.compile,
    which kcache's node records do not reach (not in a fresh_node test)."""
    facts = HOST_FACTS["dir"]
    if facts is None or not HOST_FACTS["seed"]:
        return
    shutil.copytree(facts / "probes" / ("wrapper" if wrapper else "g++"), cache_dir, dirs_exist_ok=True)


def seed_env(env: dict[str, str]) -> None:
    node = env.get("KCACHE_LOCAL_DIR", "")
    if node not in ("", "none", "off"):
        seed_node(pathlib.Path(node))


_FACTS_SCRIPT = """
from kcache.artifacts import isa_probes
from kcache.keys import fields as keyfields

class BuildHere:  # the probes are built in this process, shared with no server
    def get_or_compile(self, key, build, explanation):
        return build(), "compiled"

isa_probes.ensure(BuildHere())
keyfields.native_target_flags()

# The probe libraries too, for tests of stock torch.compile (seed_inductor).
import os, pathlib
from kcache import _torch_adaptor as adaptor
out = pathlib.Path(os.environ["KCACHE_TEST_PROBES_OUT"])
for rel, data in adaptor.isa_probe_binaries().items():
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    (out / rel).write_bytes(data)
"""


def find_host_facts(shared: pathlib.Path) -> pathlib.Path:
    """The session's host-fact records in `shared` (a directory every pytest
    worker sees), made by the first worker to ask, under a lock: a real
    process per compiler runs kcache's own checks there."""
    facts = shared / "host-facts"
    with open(shared / "host-facts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (facts / "done").exists():
            shutil.rmtree(facts, ignore_errors=True)
            procs = []
            for name, cxx in (("wrapper", str(session_cxx_wrapper(shared))), ("g++", None)):
                scratch = facts / "scratch" / name
                (scratch / "tmp").mkdir(parents=True)
                env = dict(_BASE_ENV, KCACHE_LOCAL_DIR=str(facts), TORCHINDUCTOR_CACHE_DIR=str(scratch / "ind"),
                           TMPDIR=str(scratch / "tmp"), KCACHE_TEST_CXX_LOG=str(scratch / "cxx.log"),
                           KCACHE_TEST_PROBES_OUT=str(facts / "probes" / name))
                env.pop("CXX", None)
                if cxx:
                    env["CXX"] = cxx
                procs.append(subprocess.Popen([PYTHON, "-c", _FACTS_SCRIPT], env=env, stderr=subprocess.PIPE,
                                              text=True))
            for p in procs:
                _, err = p.communicate(timeout=600)
                assert p.returncode == 0, err[-3000:]
            records = list(facts.glob("host/isa-checks-*.json"))
            # One record per compiler, or the seeding is broken (and every
            # seeded test would quietly pay for the probes again).
            assert len(records) == 2, (records, err[-2000:])
            assert all(list((facts / "probes" / name).glob("*/*.so")) for name in ("wrapper", "g++"))
            shutil.rmtree(facts / "scratch")
            (facts / "done").write_text("")
    return facts


def session_cxx_wrapper(shared: pathlib.Path) -> pathlib.Path:
    """The CXX wrapper every test of this session uses: one file, so its
    path, size and mtime (the compiler's identity in host facts) are the
    same in every test."""
    wrapper = shared / "cxx-wrapper.sh"
    if not wrapper.exists():
        scratch = shared / f"wrapper-{os.getpid()}"
        scratch.mkdir()
        os.replace(write_cxx_wrapper(scratch), wrapper)
        scratch.rmdir()
    return wrapper


PYTHON = sys.executable


class ServerProcess(harness.server.ServerProcess):
    """A real kcache-server on a random loopback port (harness/server.py) for
    compile-path tests: disk storage under tmp/server-data by default."""

    def __init__(self, tmp: pathlib.Path, storage: str | None = None, *args: str) -> None:
        super().__init__(tmp, storage or f"disk:{tmp / 'server-data'}", list(args), log_name="kcache-server.log")
