"""Restores that go wrong in ways the trailer cannot see, from one shared
cold run of the tiny job (tests/python/compile/tiny_job.py):

- a bundle missing a kernel binary (as when torch lives at another path on
  the restoring rank: Inductor's library names hash absolute include
  paths) is detected and reported, and the job still computes the right
  answer;
- verify-on-first-use refuses a planted wrong artifact: a valid, correctly
  keyed, re-sealed bundle whose generated code was altered to add 1.

(test_verify_first_use.py was merged into this file in the fourteenth
session so that both share one cold compile.)"""

from __future__ import annotations

import json

import pytest

from tiny_job import cold_copy, run, stored_bundles, tiny_cold  # noqa: F401

ADD_ONE = '''
_kcache_planted_call = call
def call(args):
    outs = _kcache_planted_call(args)
    return tuple(o + 1 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in outs)
'''


@pytest.mark.slow
def test_missing_binary_is_detected_and_reported(tmp_path, tiny_cold):
    from kcache import _core
    from kcache.artifacts import bundle_io

    cold = cold_copy(tiny_cold, tmp_path)
    assert cold["kcache"]["compiles"] == 1
    clean = run(tmp_path, "clean")
    assert clean["kcache"]["hits_node"] == 1 and clean["kcache"]["binary_misses"] == 0
    [path] = stored_bundles(tmp_path)
    manifest, sections, _ = _core.read_bundle(path.read_bytes(), expected_key=path.name)
    binaries = [n for n, _ in sections if n.startswith(bundle_io.BINARY_PREFIX)]
    assert binaries, "a CPU region carries its compiled kernel libraries"
    dropped = binaries[0]
    path.write_bytes(_core.write_bundle(manifest, [(n, d) for n, d in sections if n != dropped]))
    warm = run(tmp_path, "warm")
    assert warm["kcache"]["hits_node"] == 1
    assert warm["kcache"]["binary_misses"] == 1
    assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
    assert warm["max_diff"] < 1e-5
    assert json.loads(manifest)["binaries"]  # the manifest lists what was captured


def plant(tmp_path):
    from kcache import _core, _torch_adaptor
    from kcache.artifacts import bundle_io

    def add_one(entry):
        assert "def call(" in entry.source_code
        entry.source_code += ADD_ONE

    files = stored_bundles(tmp_path)
    for path in files:
        key = path.name
        manifest, sections, _ = _core.read_bundle(path.read_bytes(), expected_key=key)
        sections = [(name, _torch_adaptor.rewrite_fx_entries(data, add_one)
                     if name == bundle_io.MEGA_CACHE else data) for name, data in sections]
        path.write_bytes(_core.write_bundle(manifest, sections))  # re-sealed: a valid bundle
    return len(files)


@pytest.mark.slow
def test_planted_artifact_is_refused_on_first_use(tmp_path, tiny_cold):
    """Over a minute with the shared cold compile: a warm run that serves
    the plant, and a run that refuses it and compiles again."""
    cold = cold_copy(tiny_cold, tmp_path)
    assert cold["max_diff"] < 1e-5 and cold["kcache"]["compiles"] == 1
    assert plant(tmp_path) == 1
    # Without verification the plant really is served (so this test can fail):
    served = run(tmp_path, "served")
    assert served["kcache"]["hits_node"] == 1 and served["max_diff"] == pytest.approx(1.0, abs=1e-4)
    # With verification it is refused, compiled afresh, and the output is right.
    checked = run(tmp_path, "checked", KCACHE_VERIFY_FIRST_USE="1")
    assert checked["kcache"]["verify_failures"] == 1
    assert checked["max_diff"] < 1e-5
    assert stored_bundles(tmp_path) == []
