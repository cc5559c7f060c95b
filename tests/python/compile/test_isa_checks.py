"""Inductor's vector-ISA checks run once per node: the first process on a
node checks for real (a probe library loaded in a child Python) and kcache
remembers the verdicts in the node directory; a later process answers
Inductor from that record, starts no child and fetches no probes. Each
case is its own process, because Inductor keeps its verdicts per process;
one real check (and probe build) is shared by the module's tests."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from harness.jobs import run_job

# A fresh node: its directory starts empty (no host facts from the session).
pytestmark = pytest.mark.fresh_node

JOB = textwrap.dedent("""
    import json, sys
    from torch._inductor import cpu_vec_isa as isa
    from kcache.artifacts import isa_probes
    from kcache import _torch_adaptor as adaptor

    loads, shared = [], []
    real_load = isa.VecISA._probe_load
    def probe_load(self, path):
        loads.append(str(self))
        return real_load(self, path)
    isa.VecISA._probe_load = probe_load

    class Store:  # a unit-test double: builds the probes here, shares nothing
        def get_or_compile(self, key, build, explanation):
            shared.append(key)
            return build(), "compiled"

    known = json.loads(sys.argv[1]) if len(sys.argv) > 1 else None
    if known is None:
        isa_probes.ensure(Store())
    else:
        with adaptor.isa_checks(known):
            adaptor.cpu_vec_isa()
    print(json.dumps({"isa": adaptor.cpu_vec_isa(), "child_loads": loads,
                      "probes_shared": len(shared)}))
""")


def _run(tmp_path, node, inductor, *args):
    env = dict(os.environ, KCACHE_LOCAL_DIR=str(node),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / inductor))
    out = run_job([sys.executable, "-c", JOB, *args], timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _record(node):
    files = list((node / "host").glob("isa-checks-*.json"))
    assert len(files) == 1, files
    return json.loads(json.loads(files[0].read_text())["value"])


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """One real check on a fresh node and a fresh Inductor dir, shared by
    the tests below: the probe build (about 10 s of the host compiler) is
    what costs, and each later case needs only its own process, not its
    own build. Returns (tmp, node dir, first result, record)."""
    tmp = tmp_path_factory.mktemp("isa")
    node = tmp / "node"
    node.mkdir(mode=0o700)
    first = _run(tmp, node, "ind-1")
    return tmp, node, first, _record(node)


def test_checked_once_per_node_then_answered_from_the_record(checked):
    tmp, node, first, record = checked
    # Positive control: the first process really checked (a child Python
    # loaded a probe) and built the probes for the cache.
    # Two entries go through the store: this machine's facts record
    # (kcache.artifacts.machine_facts), made by probing, and the probes.
    assert first["child_loads"] and first["probes_shared"] == 2
    assert record and all(isinstance(v, bool) for v in record.values())
    # A fresh Inductor dir on the same node: same ISA, no child, no fetch.
    second = _run(tmp, node, "ind-2")
    assert second["isa"] == first["isa"]
    assert second["child_loads"] == [] and second["probes_shared"] == 0


def test_the_record_decides_and_a_missing_answer_is_checked_for_real(checked):
    tmp, node, first, record = checked
    if first["isa"] != "novec":
        # Every verdict "no": Inductor picks no vector ISA, so the answers
        # are what it uses (which is why only the user's own dir holds them).
        refused = _run(tmp, node, "ind-refused", json.dumps({k: False for k in record}))
        assert refused["isa"] == "novec" and refused["child_loads"] == []
    # An empty record: every check runs for real again (in the Inductor dir
    # that already holds the probes: the checks load them in a child
    # whether or not they were just built).
    again = _run(tmp, node, "ind-1", "{}")
    assert again["isa"] == first["isa"] and again["child_loads"]


def test_an_untrusted_node_directory_keeps_no_record(checked):
    tmp = checked[0]
    shared = tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "host").mkdir()
    (shared / "host").chmod(0o777)
    for _ in range(2):  # the probes already built: only the checks run
        result = _run(tmp, shared, "ind-1")
        assert result["child_loads"], "an untrusted directory must not answer the checks"
    assert not list((shared / "host").glob("*.json"))
