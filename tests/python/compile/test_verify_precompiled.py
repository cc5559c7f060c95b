"""KCACHE_VERIFY_FIRST_USE covers precompiled regions: a planted variant
(valid, correctly keyed, re-sealed, its portable checks those of the real
one, but its function compiled from another model) is served without the
switch and refused with it, forward and backward compared with eager."""

from __future__ import annotations

import json
import shutil

import pytest

from kc_testing import PYTHON, REPO, python_env, seed_node
from harness.jobs import run_job


def single(tmp_path, node: str, inductor: str, *mutations: str, **env: str) -> dict:
    args = [PYTHON, "-m", "falsehit.runner", "--seed", "7", "--work", str(tmp_path), "--out", "-",
            "--single", node, inductor]
    for m in mutations:
        args += ["--mutation", m]
    env = python_env(PYTHONPATH=str(REPO / "tests"), OMP_NUM_THREADS="1", TORCHINDUCTOR_COMPILE_THREADS="1", **env)
    out = run_job(args, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def variants(node) -> dict:
    """{path: manifest} of the node tier's precompiled variants."""
    from kcache import _core

    out = {}
    for p in (node / "objects").rglob("*"):
        if p.is_file():
            manifest = json.loads(_core.inspect_bundle(p.read_bytes())[0])
            if "portable_checks" in manifest:
                out[p] = manifest
    return out


def plant(case_dir) -> None:
    """node-a's variant, re-sealed with node-b's function and kernels."""
    from kcache import _core

    (real_path, _), = variants(case_dir / "node-a").items()
    (other_path, _), = variants(case_dir / "node-b").items()
    assert real_path.name == other_path.name  # the same key: the global is not in it
    real, _, _ = _core.read_bundle(real_path.read_bytes(), expected_key=real_path.name)
    other, sections, _ = _core.read_bundle(other_path.read_bytes(), expected_key=other_path.name)
    planted = json.loads(other)
    planted["portable_checks"] = json.loads(real)["portable_checks"]
    real_path.write_bytes(_core.write_bundle(json.dumps(planted), sections))


@pytest.mark.slow
def test_planted_precompiled_variant_is_refused_on_first_use(tmp_path):
    """Over a minute: two cold compiles (the real model and the other one),
    a warm run that serves the plant and one that refuses it."""
    case_dir = tmp_path / "fz_every_7"
    for node in ("node-a", "node-b"):  # nodes that know their host (kc_testing.seed_node)
        seed_node(case_dir / node)
    real = single(tmp_path, "node-a", "ind-a")
    other = single(tmp_path, "node-b", "ind-b", "m.SCALE = 0.125", "m.FLAG = not m.FLAG")
    assert real["delta"]["misses"] == other["delta"]["misses"] == 1  # both compiled (controls)
    plant(case_dir)
    shutil.copytree(case_dir / "node-a", case_dir / "node-c")
    # Without the switch the plant is served: every block hits and is wrong.
    served = single(tmp_path, "node-a", "ind-served")
    assert served["delta"]["precompiled_blocks"] == 3 and served["delta"]["hits_node"] == 1
    assert served["out_diff"] > 1e-2
    # With it, the first call is compared with eager and the variant refused:
    # its blocks take the traced path and the node tier's copy is dropped.
    checked = single(tmp_path, "node-c", "ind-checked", KCACHE_VERIFY_FIRST_USE="1")
    assert checked["delta"]["hits_node"] == 1 and checked["delta"]["verify_failures"] == 1
    assert checked["delta"]["precompiled_blocks"] == 0
    assert checked["out_diff"] < 1e-5 and checked["grad_diff"] < 1e-5
    assert variants(case_dir / "node-c") == {}
