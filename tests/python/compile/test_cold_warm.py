"""The traced path end to end (the default since issue 32, and what a
region that cannot be precompiled takes): a real training job compiles its
regions cold and uploads them to a real kcache-server (traced_job's cold
run, shared by every test here); a fresh process restores them from the
node tier, or from a server on a copy of that storage with an empty node
tier, Inductor cache and temp dir, with zero recompiles — proved by
PyTorch's own counters, the server's metrics and a wrapper installed as
Inductor's compiler. The precompiled path has its own proof
(test_precompiled_warm.py)."""

from __future__ import annotations

import pytest

from kc_testing import ServerProcess
from tiny_job import stored_bundles
from traced_job import LAYERS, run_job

# A fresh node and container: node directories start empty (no host facts).
pytestmark = pytest.mark.fresh_node


@pytest.mark.slow
def test_cold_then_warm_restores_with_zero_recompiles(tmp_path, traced_cold):
    """Over a minute when it is the module's first test: it pays the shared
    cold compile (traced_job) for all three; its own warm process takes
    seconds."""
    cold = traced_cold.result
    # The GPT2Blocks are one region: the others reuse it in-process.
    assert cold["kcache"]["reuses"] >= 1
    assert cold["kcache"]["misses"] >= 2 and cold["kcache"]["compiles"] == cold["kcache"]["misses"]
    assert cold["inductor"].get("fxgraph_cache_miss", 0) > 0
    assert len(cold["region_compiles"]) > 0

    # A fresh process, fresh Inductor cache dir, the cold run's node tier.
    warm = run_job(tmp_path, traced_cold.wrapper, "warm", node=traced_cold.copy_node(tmp_path / "node"))
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
    # ISA probes, which kcache ships too (kcache.artifacts.isa_probes).
    assert warm["region_compiles"] == [], warm["region_compiles"][:3]
    assert warm["builds"] == [], warm["builds"][:3]
    # Same numbers: the restored kernels compute what the cold ones did.
    assert warm["losses"] == pytest.approx(cold["losses"], rel=1e-5)


@pytest.mark.slow
def test_corrupt_node_bundle_costs_a_compile_not_a_failure(tmp_path, traced_cold):
    """Its second process really compiles the refused region again (the
    point of the test)."""
    cold = traced_cold.result
    traced_cold.copy_node(tmp_path / "node")
    # The region bundles: the ISA-probe entry is not fetched again on this
    # node (its check verdicts are remembered there, kcache.artifacts.isa_probes).
    files = stored_bundles(tmp_path)
    assert len(files) == cold["kcache"]["misses"] >= 2
    # Flip a byte in the middle of the smallest region bundle: one region
    # to compile again, the others still restored from the node. (The
    # largest, the block's, until the fifteenth session: the refusal is the
    # same for any bundle, and the smallest region compiles fastest.)
    bad = min(files, key=lambda p: p.stat().st_size)
    b = bytearray(bad.read_bytes())
    b[len(b) // 2] ^= 0xFF
    bad.write_bytes(bytes(b))
    again = run_job(tmp_path, traced_cold.wrapper, "again", node=tmp_path / "node")
    # The client verifies every bundle before handing it out: the corrupt
    # file is refused (and deleted), and that region compiled here instead.
    k = again["kcache"]
    assert k["client"]["refused"] == 1
    assert k["compiles"] == k["misses"] == 1
    assert k["hits_node"] == len(files) - 1
    assert not bad.exists() or bad.read_bytes() != bytes(b)  # not left in place
    assert again["losses"] == pytest.approx(cold["losses"], rel=1e-5)


@pytest.mark.slow
def test_gpt2_blocks_warm_from_the_server(tmp_path, traced_cold):
    cold = traced_cold.result
    k = cold["kcache"]
    # One compile per distinct region: the GPT2Blocks are one region,
    # compiled once and reused by every other block in-process.
    assert k["reuses"] >= LAYERS - 1
    assert k["compiles"] == k["misses"] <= 8
    # + the ISA probes entry; the machine-facts record is a client compile
    # and an upload of its own (kcache.artifacts.machine_facts)
    assert k["client"]["uploads"] == k["compiles"] + 2 and k["isa_probes_run"] > 0
    # Positive control for "no builds" below: the wrapper saw the cold builds.
    assert cold["region_compiles"] and cold["builds"]

    server = ServerProcess(tmp_path, f"disk:{traced_cold.copy_storage(tmp_path / 'server-data')}")
    try:
        before = server.metrics()
        warm = run_job(tmp_path, traced_cold.wrapper, "warm", node=tmp_path / "node-warm", url=server.url)
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
        after = server.metrics()
        assert after["kcache_cache_hits_total"] - before.get("kcache_cache_hits_total", 0) >= k["compiles"]
        # Bit-identical numbers: same losses, same gradients.
        assert warm["losses"] == cold["losses"]
        assert warm["grad_sha256"] == cold["grad_sha256"]
    finally:
        server.stop()
