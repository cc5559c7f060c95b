"""The traced path (KCACHE_PRECOMPILED=0) end to end: a cold training job compiles each distinct
region once and uploads it to a real kcache-server; a fresh process (empty
node tier, empty Inductor cache) fetches every region from the server and
PyTorch generates no code and runs no host compiler for it."""

from __future__ import annotations

import json
import subprocess

import pytest

from kc_testing import PYTHON, REPO, ServerProcess, python_env
from test_cold_warm import _is_build, _is_region_compile

LAYERS = 12


def run_job(tmp_path, cxx, name, url):
    wrapper, _ = cxx
    log = tmp_path / f"cxx-{name}.log"
    # A fresh container: its own temp dir too, where PyTorch keeps the
    # precompiled kernel header (outside the Inductor dir).
    tmp = tmp_path / f"tmp-{name}"
    tmp.mkdir()
    env = python_env(KCACHE_URL=url, KCACHE_LOCAL_DIR=str(tmp_path / f"node-{name}"),
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{name}"), CXX=str(wrapper),
                     KCACHE_TEST_CXX_LOG=str(log), KCACHE_PRECOMPILED="0", TMPDIR=str(tmp))
    # --kv-cache: transformers' default, where Dynamo traces every block
    # (layer_idx is read) and kcache reuses the region's artifact in-process.
    out = subprocess.run([PYTHON, str(REPO / "examples" / "train_regional.py"), "--layers", str(LAYERS),
                          "--steps", "2", "--kv-cache"], capture_output=True, text=True, env=env,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    lines = log.read_text().splitlines() if log.exists() else []
    result["region_compiles"] = [l for l in lines if _is_region_compile(l)]
    result["builds"] = [l for l in lines if _is_build(l)]
    result["header_builds"] = [l for l in lines if ".gch" in l or ".pch" in l]
    return result


@pytest.mark.slow
def test_twelve_block_gpt2_warm_from_the_server(tmp_path, cxx_wrapper):
    server = ServerProcess(tmp_path)
    try:
        cold = run_job(tmp_path, cxx_wrapper, "cold", server.url)
        k = cold["kcache"]
        # One compile per distinct region: the 12 GPT2Blocks are one region,
        # compiled once and reused 11 times in-process.
        assert k["reuses"] >= LAYERS - 1
        assert k["compiles"] == k["misses"] <= 8
        assert k["client"]["uploads"] == k["compiles"] + 1  # + the ISA probes entry
        # Positive control for "no builds" below: the wrapper saw the cold builds.
        assert cold["region_compiles"] and cold["builds"]
        after_cold = server.metrics()

        warm = run_job(tmp_path, cxx_wrapper, "warm", server.url)
        w = warm["kcache"]
        assert w["misses"] == 0 and w["compiles"] == 0
        assert w["hits_server"] == k["compiles"]
        # PyTorch's own counters: no code generation, no AOTAutograd tracing
        # for anything PyTorch itself caches (see test_cold_warm for the one
        # trivial graph it never caches).
        assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
        assert warm["inductor"].get("fxgraph_cache_bypass", 0) == 0
        assert warm["inductor"].get("fxgraph_cache_hit", 0) >= cold["inductor"]["fxgraph_cache_miss"] > 0
        never_saved = (cold["aot_autograd"].get("autograd_cache_miss", 0)
                       - cold["aot_autograd"].get("autograd_cache_saved", 0))
        assert warm["aot_autograd"].get("autograd_cache_miss", 0) == never_saved
        # The host compiler built none of the model's kernels.
        assert warm["region_compiles"] == []
        assert warm["builds"] == []  # not even Inductor's ISA probes (shipped by kcache)
        # Nor the precompiled kernel header PyTorch's loader builds in a
        # fresh temp dir before it finds the restored libraries (cold did).
        assert cold["header_builds"] and warm["header_builds"] == []
        # The server saw the hits.
        after_warm = server.metrics()
        assert after_warm["kcache_cache_hits_total"] - after_cold["kcache_cache_hits_total"] >= k["compiles"]
        # Bit-identical numbers: same losses, same gradients.
        assert warm["losses"] == cold["losses"]
        assert warm["grad_sha256"] == cold["grad_sha256"]
    finally:
        server.stop()
