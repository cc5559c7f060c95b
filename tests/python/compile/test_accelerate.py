"""Accelerate's own regional path, with bf16 mixed precision, through kcache."""

from __future__ import annotations

import json

import pytest

from kc_testing import PYTHON, REPO, python_env
from harness.jobs import run_job


def run(tmp_path, name, *extra):
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), KCACHE_PRECOMPILED="1",
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"ind-{name}"))
    out = run_job([PYTHON, str(REPO / "examples" / "accelerate_train.py"), "--steps", "2", *extra],
                  timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_install_rebinds_accelerate_names():
    import accelerate.accelerator
    import accelerate.utils

    import kcache
    import kcache.accelerate

    original = accelerate.accelerator.compile_regions
    kcache.accelerate.install()
    try:
        assert accelerate.accelerator.compile_regions is kcache.compile_regions
        assert accelerate.utils.compile_regions is kcache.compile_regions
        # Every regional-compile entry Accelerate's prepare() calls (the
        # DeepSpeed variant; from 1.12 the FSDP2 one) goes through kcache: a
        # new variant in a later Accelerate fails here, not silently.
        variants = [n for n in vars(accelerate.accelerator) if n.startswith("compile_regions")]
        assert "compile_regions_deepspeed" in variants
        for name in variants:
            fn = getattr(accelerate.accelerator, name)
            assert fn.__module__.startswith("kcache"), f"accelerate.accelerator.{name} not rebound"
    finally:
        kcache.accelerate.uninstall()
    assert accelerate.accelerator.compile_regions is original


@pytest.mark.slow
def test_accelerate_mixed_precision_cold_then_warm(tmp_path):
    """Over a minute: Accelerate's bf16 job cold (a compile of every region),
    then warm."""
    cold = run(tmp_path, "cold")
    # Accelerate's bf16 regional path took kcache's precompiled path: the
    # compiled twin really ran (the mixed-precision forward was rebound),
    # every region traced once, under autocast.
    k = cold["kcache"]
    assert k["precompiled_blocks"] >= 2 and k["precompiled_traces"] >= 1 and k["compiles"] >= 1
    assert {r["path"] for r in cold["regions"]} == {"precompiled"}, cold["regions"]
    warm = run(tmp_path, "warm")
    w = warm["kcache"]
    assert w["misses"] == 0 and w["hits_node"] == k["misses"] and w["precompiled_traces"] == 0
    # Positive controls: the cold run's Dynamo counters are not empty, and
    # the warm run really ran precompiled blocks (not eager ones).
    assert cold["stats"] != {} and w["precompiled_blocks"] >= 2
    assert warm["stats"] == {}  # Dynamo traced nothing
    assert warm["aot_autograd"].get("autograd_cache_miss", 0) == 0
    assert warm["losses"] == cold["losses"]


@pytest.mark.slow
def test_accelerate_mixed_precision_traced_path(tmp_path):
    """Over a minute: Accelerate's job compiled cold on the traced path."""
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), KCACHE_PRECOMPILED="0",
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "ind-traced"))
    out = run_job([PYTHON, str(REPO / "examples" / "accelerate_train.py"), "--steps", "2"], timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    cold = json.loads(out.stdout.strip().splitlines()[-1])
    assert cold["kcache"]["regions_seen"] >= 2 and cold["kcache"]["compiles"] >= 1
    assert cold["kcache"]["precompiled_blocks"] == 0
