"""The traced path end to end (KCACHE_PRECOMPILED=0, and what a region that
cannot be precompiled takes): a real training job compiles its regions
cold, and a fresh process restores them with zero recompiles — proved by
PyTorch's own counters and by a wrapper installed as Inductor's compiler.
The precompiled path has its own proof (test_precompiled_warm.py)."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from kc_testing import PYTHON, REPO, python_env
from tiny_job import stored_bundles

JOB = str(REPO / "examples" / "train_regional.py")


def run_job(tmp_path, cxx, name, *extra, cache_dir=None):
    wrapper, log = cxx
    env = python_env(
        KCACHE_LOCAL_DIR=str(tmp_path / "node"),
        TORCHINDUCTOR_CACHE_DIR=str(cache_dir or tmp_path / f"inductor-{name}"),
        CXX=str(wrapper),
        KCACHE_TEST_CXX_LOG=str(tmp_path / f"cxx-{name}.log"),
        KCACHE_PRECOMPILED="0",
    )
    # --kv-cache: transformers' default, where Dynamo traces every block
    # (layer_idx is read) and kcache reuses the region's artifact in-process.
    out = subprocess.run([PYTHON, JOB, "--layers", "2", "--steps", "2", "--kv-cache", *extra],
                         capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    log_path = tmp_path / f"cxx-{name}.log"
    lines = log_path.read_text().splitlines() if log_path.exists() else []
    result["region_compiles"] = [l for l in lines if _is_region_compile(l)]
    result["builds"] = [l for l in lines if _is_build(l)]
    result["compiler_runs"] = len(lines)
    return result


def _is_build(cmdline: str) -> bool:
    """Any host-compiler run that builds something (not -E, not a --help query)."""
    return " -E " not in f" {cmdline} " and "--help" not in cmdline


def _is_region_compile(cmdline: str) -> bool:
    """A host-compiler run that builds one of the model's kernels.

    Not counted: kcache's `-march=native -Q --help=target` query (the target
    key field), Inductor's per-cache-dir ISA probes (tiny *_chk_kernel
    programs it builds once per Inductor cache directory, independent of any
    model) and the preprocessor pass (-E) of the shared kernel header.
    """
    if " -E " in f" {cmdline} " or "--help" in cmdline:
        return False  # preprocessing, or kcache's own -march=native query
    srcs = [w for w in cmdline.split() if w.endswith(".cpp")]
    for src in srcs:
        try:
            text = pathlib.Path(src).read_text()
        except OSError:
            return True
        if "_chk_kernel" in text:
            return False
    return True


@pytest.mark.slow
def test_cold_then_warm_restores_with_zero_recompiles(tmp_path, cxx_wrapper):
    cold = run_job(tmp_path, cxx_wrapper, "cold")
    # Both GPT2Blocks are one region: the second is reused in-process.
    assert cold["kcache"]["reuses"] >= 1
    assert cold["kcache"]["misses"] >= 2 and cold["kcache"]["compiles"] == cold["kcache"]["misses"]
    assert cold["inductor"].get("fxgraph_cache_miss", 0) > 0
    assert len(cold["region_compiles"]) > 0

    warm = run_job(tmp_path, cxx_wrapper, "warm")  # a fresh process, fresh Inductor cache dir
    assert warm["kcache"]["misses"] == 0
    assert warm["kcache"]["hits_node"] == cold["kcache"]["misses"]
    # PyTorch's own counters: nothing was generated or traced by AOTAutograd again.
    assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
    assert warm["inductor"].get("fxgraph_cache_bypass", 0) == 0
    assert warm["inductor"].get("fxgraph_cache_hit", 0) >= cold["inductor"]["fxgraph_cache_miss"]
    # AOTAutograd: every graph PyTorch itself caches is a hit. PyTorch never
    # saves some trivial graphs (an output that aliases an input, such as a
    # p=0 dropout); those miss in any process, with or without kcache.
    cold_aot = cold["aot_autograd"]
    never_saved = cold_aot.get("autograd_cache_miss", 0) - cold_aot.get("autograd_cache_saved", 0)
    assert never_saved <= 1
    assert warm["aot_autograd"].get("autograd_cache_miss", 0) == never_saved
    assert warm["aot_autograd"].get("autograd_cache_hit", 0) >= cold_aot.get("autograd_cache_saved", 0)
    # The host compiler built none of the model's kernels — nor Inductor's
    # ISA probes, which kcache ships too (kcache.isa_probes).
    assert warm["region_compiles"] == [], warm["region_compiles"][:3]
    assert warm["builds"] == [], warm["builds"][:3]
    # Same numbers: the restored kernels compute what the cold ones did.
    assert warm["losses"] == pytest.approx(cold["losses"], rel=1e-5)


@pytest.mark.slow
def test_corrupt_node_bundle_costs_a_compile_not_a_failure(tmp_path, cxx_wrapper):
    cold = run_job(tmp_path, cxx_wrapper, "cold", "--model", "llama", "--layers", "2")
    # The region bundles: the ISA-probe entry is not fetched again on this
    # node (its check verdicts are remembered there, kcache.isa_probes).
    files = stored_bundles(tmp_path)
    assert files
    for p in files:  # flip a byte in the middle of every stored region bundle
        b = bytearray(p.read_bytes())
        b[len(b) // 2] ^= 0xFF
        p.write_bytes(bytes(b))
    again = run_job(tmp_path, cxx_wrapper, "again", "--model", "llama", "--layers", "2")
    # The client verifies every bundle before handing it out: each corrupt
    # file is refused (and deleted), and the region compiled here instead.
    assert again["kcache"]["client"]["refused"] == len(files)
    assert again["kcache"]["compiles"] == again["kcache"]["misses"] == len(files)
    assert again["kcache"]["misses"] == cold["kcache"]["misses"]
    assert again["losses"] == pytest.approx(cold["losses"], rel=1e-5)
