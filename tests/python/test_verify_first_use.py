"""Verify-on-first-use refuses a planted wrong artifact: a valid, correctly
keyed, re-sealed bundle whose generated code was altered to add 1."""

from __future__ import annotations

import pytest

from tiny_job import run, stored_bundles

ADD_ONE = '''
_kcache_planted_call = call
def call(args):
    outs = _kcache_planted_call(args)
    return tuple(o + 1 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in outs)
'''


def plant(tmp_path):
    from kcache import _core, _torch_adaptor, bundle_io

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
def test_planted_artifact_is_refused_on_first_use(tmp_path):
    """Over a minute: a cold compile, a warm run that serves the plant, and a
    run that refuses it and compiles again."""
    cold = run(tmp_path, "cold")
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
