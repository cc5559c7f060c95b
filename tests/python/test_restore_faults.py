"""Restores that go wrong in ways the trailer cannot see: a bundle missing a
kernel binary (as when torch lives at another path on the restoring rank:
Inductor's library names hash absolute include paths) is detected and
reported, and the job still computes the right answer."""

from __future__ import annotations

import json

import pytest

from tiny_job import run, stored_bundles


@pytest.mark.slow
def test_missing_binary_is_detected_and_reported(tmp_path):
    from kcache import _core, bundle_io

    cold = run(tmp_path, "cold")
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
