"""Machine facts from the server (issue 52): a fresh container on a machine
type the server knows runs no ISA probe and asks the compiler nothing about
-march=native; one on another CPU probes (the positive control); a record
that names another machine is refused and never picks a wrong ISA. Real
kcache-server, real Inductor probes; each case is a fresh process with a
fresh node directory and a fresh Inductor directory (a new container)."""

from __future__ import annotations

import json
import textwrap

import pytest

from kc_testing import PYTHON, ServerProcess, python_env
from harness.jobs import run_job

pytestmark = pytest.mark.fresh_node

JOB = textwrap.dedent("""
    import json, os, sys
    from torch._inductor import cpu_vec_isa as isa
    from kcache import _torch_adaptor as adaptor
    from kcache.artifacts import isa_probes, machine_facts
    from kcache.keys import fields as keyfields, host_facts
    from kcache.state import counters, store

    loads = []
    real_load = isa.VecISA._probe_load
    def probe_load(self, path):
        loads.append(str(self))
        return real_load(self, path)
    isa.VecISA._probe_load = probe_load
    asked = []
    real_query = keyfields._query_native_target_flags
    keyfields._query_native_target_flags = lambda cxx: asked.append(cxx) or real_query(cxx)

    mode = sys.argv[1]
    if mode == "other-cpu":  # another CPU: other feature flags
        host_facts.cpu_flags = lambda: "0123456789abcdef"
    client = store.get_store()
    if mode == "forge":  # a record under this machine's key that names another CPU, every ISA "no"
        inputs = machine_facts.machine_inputs()
        key, expl = machine_facts.facts_key(inputs)
        forged = dict(inputs, cpu_flags="fedcba9876543210")
        names = json.loads(sys.argv[2])
        assert client.put(key, machine_facts.pack(key, expl, forged, {n: False for n in names}, "0" * 16))
    isa_probes.ensure(client)
    c = counters.get()
    print(json.dumps({"isa": adaptor.cpu_vec_isa(), "march": keyfields.native_target_flags(),
                      "child_loads": loads, "march_queries": len(asked),
                      "probes_run": c.isa_probes_run, "hits": c.machine_facts_hits,
                      "refused": c.machine_facts_refused, "node_record": host_facts.lookup(
                          "isa-checks", isa_probes._record_inputs())}))
""")


def _run(tmp, name, url, cxx, *args):
    node = tmp / f"node-{name}"
    node.mkdir(mode=0o700)
    env = python_env(KCACHE_URL=url, KCACHE_LOCAL_DIR=str(node), CXX=str(cxx),
                     TORCHINDUCTOR_CACHE_DIR=str(tmp / f"inductor-{name}"))
    out = run_job([PYTHON, "-c", JOB, *args], timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_machine_type_probes_once_and_another_cpu_probes_again(tmp_path, cxx_wrapper):
    server = ServerProcess(tmp_path)
    try:
        first = _run(tmp_path, "first", server.url, cxx_wrapper[0], "plain")
        # Positive control: the first container of this machine type probed.
        assert first["probes_run"] > 0 and first["child_loads"] and first["hits"] == 0
        assert first["march_queries"] == 1
        after_first = server.metrics()
        assert after_first["kcache_uploads_total"] == 2  # the facts record and the probes

        second = _run(tmp_path, "second", server.url, cxx_wrapper[0], "plain")
        assert second["hits"] == 1 and second["refused"] == 0
        assert second["probes_run"] == 0 and second["child_loads"] == []
        assert second["march_queries"] == 0  # -march=native answered by the record too
        assert (second["isa"], second["march"]) == (first["isa"], first["march"])
        assert second["node_record"] is not None  # and remembered for this node
        after_second = server.metrics()
        assert after_second["kcache_cache_hits_total"] - after_first["kcache_cache_hits_total"] == 1
        assert after_second["kcache_uploads_total"] == 2

        other = _run(tmp_path, "other", server.url, cxx_wrapper[0], "other-cpu")
        assert other["hits"] == 0 and other["probes_run"] > 0 and other["child_loads"]
        assert other["isa"] == first["isa"]
    finally:
        server.stop()


def test_a_record_naming_another_machine_is_refused(tmp_path, cxx_wrapper):
    (tmp_path / "reference").mkdir()
    (tmp_path / "forged").mkdir()
    reference = ServerProcess(tmp_path / "reference")
    try:
        truth = _run(tmp_path, "truth", reference.url, cxx_wrapper[0], "plain")
    finally:
        reference.stop()
    names = json.loads(truth["node_record"])
    assert truth["isa"] != "novec" or not names
    server = ServerProcess(tmp_path / "forged")
    try:
        forged = _run(tmp_path, "forged", server.url, cxx_wrapper[0], "forge", json.dumps(list(names)))
        assert forged["refused"] == 1 and forged["hits"] == 0
        assert forged["probes_run"] > 0 and forged["child_loads"]
        assert forged["isa"] == truth["isa"]  # not the forged record's "no vector ISA"
    finally:
        server.stop()
