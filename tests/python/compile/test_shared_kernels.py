"""Kernel libraries shared between compile workers (issue 51;
kcache/background/shared_kernels.py): a kernel library is built once
cluster-wide and installed by every other process that needs it. Real
kcache-server, real Inductor and g++ (counted by the CXX wrapper's log);
each process is a fresh container (its own node and Inductor directories)
running kernel_share_job.py: stock torch.compile of one function, its
libraries built through the store as a compile worker builds them."""

from __future__ import annotations

import json
import pathlib
import time

import pytest
from harness.jobs import finish_job, start_job

from kc_testing import PYTHON, ServerProcess, libraries_built, python_env

JOB = str(pathlib.Path(__file__).with_name("kernel_share_job.py"))


def _start(tmp, name, url, cxx, mode="plain", gate=None):
    node = tmp / f"node-{name}"
    node.mkdir(mode=0o700)
    log = tmp / f"cxx-{name}.log"
    env = python_env(KCACHE_URL=url, KCACHE_LOCAL_DIR=str(node), CXX=str(cxx), KCACHE_TEST_CXX_LOG=str(log),
                     TORCHINDUCTOR_CACHE_DIR=str(tmp / f"inductor-{name}"), KCACHE_TEST_CXX_GATE=str(gate or ""),
                     KCACHE_TEST_CXX_GATE_MATCH=".main.so")
    proc = start_job([PYTHON, JOB, mode], env=env)
    return proc, log


def _result(proc) -> dict:
    done = finish_job(proc, 900)
    out, err = done.stdout, done.stderr
    assert proc.returncode == 0, err[-3000:]
    res = json.loads(out.strip().splitlines()[-1])
    res["stderr"] = err
    return res


@pytest.mark.slow  # four fresh processes, each compiling
def test_a_library_is_built_once_and_installed_elsewhere_and_forgeries_are_refused(tmp_path, cxx_wrapper):
    server = ServerProcess(tmp_path)
    try:
        first_proc, first_log = _start(tmp_path, "first", server.url, cxx_wrapper[0])
        first = _result(first_proc)
        names = first["asked"]
        # Positive control: the first container's compiler built every library it needed.
        assert len(names) >= 2 and first["totals"] == {**first["totals"], "built": len(names), "fetched": 0}
        assert sorted(libraries_built(first_log)) == sorted(names)
        assert server.metrics()["kcache_uploads_total"] == len(names)
        hits = server.metrics()["kcache_cache_hits_total"]

        second_proc, second_log = _start(tmp_path, "second", server.url, cxx_wrapper[0])
        second = _result(second_proc)
        assert second["asked"] == names
        assert second["totals"] == {**second["totals"], "built": 0, "fetched": len(names), "refused": 0}
        assert libraries_built(second_log) == []  # g++ wrote no kernel library
        assert server.metrics()["kcache_cache_hits_total"] - hits == len(names)
        assert second["max_err"] < 1e-5

        # Forged entries (not an ELF file; an ELF file under another name)
        # are refused, said, and the libraries built here: the output is right.
        forged_proc, forged_log = _start(tmp_path, "forged", server.url, cxx_wrapper[0], mode="forge")
        forged = _result(forged_proc)
        assert forged["totals"] == {**forged["totals"], "fetched": 0, "refused": len(names)}
        assert sorted(libraries_built(forged_log)) == sorted(names)
        assert "is not an ELF file; built here" in forged["stderr"]
        assert "not exactly" in forged["stderr"]
        assert forged["max_err"] < 1e-5
    finally:
        server.stop()

    # No server (killed): every library is built here, the job unharmed.
    gone_proc, gone_log = _start(tmp_path, "gone", server.url, cxx_wrapper[0])
    gone = _result(gone_proc)
    assert sorted(libraries_built(gone_log)) == sorted(names) and gone["max_err"] < 1e-5


@pytest.mark.slow
def test_two_processes_at_once_build_each_library_once(tmp_path, cxx_wrapper):
    server = ServerProcess(tmp_path)
    gate = tmp_path / "gate"
    gate.write_text("")
    try:
        # The first holds its first library build at the compiler (the gate),
        # under that library's lease.
        a, a_log = _start(tmp_path, "a", server.url, cxx_wrapper[0], gate=gate)
        deadline = time.monotonic() + 600
        while not libraries_built(a_log) and a.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert libraries_built(a_log), "the first process never reached a library build"
        # The second needs the same library: it waits on the lease, builds nothing meanwhile.
        b, b_log = _start(tmp_path, "b", server.url, cxx_wrapper[0])
        while server.metrics().get("kcache_leases_waited_total", 0) < 1 and b.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.metrics().get("kcache_leases_waited_total", 0) >= 1, "the second process did not wait"
        assert libraries_built(b_log) == []
        gate.unlink()
        ra, rb = _result(a), _result(b)
    finally:
        if gate.exists():
            gate.unlink()
        server.stop()
    names = ra["asked"]
    assert rb["asked"] == names and len(names) >= 2
    # Each library built exactly once over both processes, whoever took its lease.
    built = libraries_built(a_log) + libraries_built(b_log)
    assert sorted(built) == sorted(names), built
    assert ra["totals"]["built"] + rb["totals"]["built"] == len(names)
    assert ra["totals"]["fetched"] + rb["totals"]["fetched"] == len(names)
    assert rb["totals"]["fetched"] >= 1
    assert ra["max_err"] < 1e-5 and rb["max_err"] < 1e-5
