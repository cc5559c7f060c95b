"""Blocks compiled in place (kcache.compile_regions_in_place: Accelerate's
DeepSpeed path and, from Accelerate 1.12 on, its FSDP2 path) take the
precompiled path too: a warm process traces nothing, misses nothing, builds
no kernel and trains bit-identically; a block with module hooks of its own,
before or after compiling, runs them eagerly around its precompiled
forward, and one with a hook inside its forward takes the traced path."""

from __future__ import annotations

import pytest

from kc_testing import ServerProcess
from test_precompiled_blocks import TOL, run
from test_precompiled_warm import run_job


@pytest.mark.slow
def test_in_place_warm_start_traces_nothing_and_trains_bit_identically(tmp_path, cxx_wrapper):
    """Over a minute: a real GPT-2 job compiled cold, then started warm."""
    server = ServerProcess(tmp_path)
    try:
        args = ("--compiler", "kcache-in-place")
        layers, steps = 2, 3  # one region for every block, however many
        cold = run_job(tmp_path, cxx_wrapper, "cold", server.url, *args, layers=layers, steps=steps)
        k = cold["kcache"]
        regions = cold["regions"]
        # GPT2Block overrides __call__ (transformers' GradientCheckpointingLayer):
        # it runs outside, and kcache compiles what nn.Module.compile() would.
        assert {r["path"] for r in regions} == {"precompiled"}, regions
        assert any(r["label"].startswith("GPT2Block/") for r in regions), regions
        # Positive controls: one trace per region, kernels built.
        traces = [t for t in cold["dynamo_traced"] if t.startswith("call_impl ")]
        assert k["precompiled_traces"] == len(regions) == len(traces) >= 4, cold["dynamo_traced"]
        assert k["precompiled_blocks"] >= layers + len(regions) - 1
        assert cold["builds"], "the cold run built no kernel"

        warm = run_job(tmp_path, cxx_wrapper, "warm", server.url, *args, layers=layers, steps=steps)
        w = warm["kcache"]
        assert warm["dynamo_traced"] == [] and warm["stats"] == {}, warm["dynamo_traced"]
        assert w["precompiled_traces"] == w["misses"] == w["compiles"] == 0
        assert w["precompiled_blocks"] == k["precompiled_blocks"]
        assert w["precompiled_fallbacks"] == w["precompiled_guard_failures"] == 0
        assert w["hits_server"] == len(regions)
        assert [r["status"] for r in warm["regions"]] == ["server"] * len(regions)
        assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
        assert warm["aot_autograd"].get("autograd_cache_miss", 0) == 0
        assert warm["builds"] == [] and warm["compiler_runs"] == [], warm["compiler_runs"][:3]
        assert warm["losses"] == cold["losses"] and len(warm["losses"]) == steps
        assert warm["all_grads_sha256"] == cold["all_grads_sha256"]
    finally:
        server.stop()


@pytest.mark.slow
def test_in_place_blocks_with_hooks_run_them_eagerly_around_a_precompiled_forward(tmp_path):
    result, log = run(tmp_path, "in-place", "in-place")
    first, second, third = result["steps"]
    # Step 1: blocks 0 and 2 precompiled whole (two call signatures: block
    # 0's input needs no gradient, block 2's does); block 1 (a pre-hook of
    # its own) runs the hook eagerly around its forward, precompiled as a
    # region of its own (kcache/precompiled/hooked.py). The hook ran in
    # eager and in kcache's model, and changed the output alike.
    assert first["diff"] <= TOL and first["hook_calls"] == 2, first
    assert first["delta"]["precompiled_traces"] == 3 and first["delta"]["precompiled_blocks"] == 3, first
    assert first["delta"]["precompiled_fallbacks"] == 0, first
    forwards = [r for r in result["regions"] if r.get("entry") == "forward"]
    assert forwards and all(r["path"] == "precompiled" for r in forwards), result["regions"]
    # Step 2: a hook added to block 0 after compiling is not skipped: block
    # 0 now takes the forward route too (its own call signature, one trace).
    assert second["diff"] <= TOL and second["hook_calls"] == 4, second
    assert second["delta"]["precompiled_traces"] == 1 and second["delta"]["precompiled_fallbacks"] == 0, second
    # Step 3: a hook inside block 2's forward (on its Linear) would be
    # compiled into the forward: that block takes the traced path, hook run.
    assert third["diff"] <= TOL and third["hook_calls"] == 6, third
    assert third["delta"]["precompiled_fallbacks"] == 1, third
    assert "module hooks that run inside its forward (lin._forward_hooks)" in log

    # A second process loads those regions, each first use compared with
    # eager (the forward region with its class's forward alone, its hooks
    # outside both): all agree, nothing compiled, the hooks ran.
    warm, _ = run(tmp_path, "in-place-warm", "in-place", KCACHE_VERIFY_FIRST_USE="1")
    for step, want in zip(warm["steps"], (2, 4, 6)):
        assert step["diff"] <= TOL and step["hook_calls"] == want, step
        assert step["delta"]["verify_failures"] == 0 and step["delta"]["precompiled_traces"] == 0, step
    assert warm["steps"][0]["delta"]["hits_node"] >= 2, warm["steps"][0]


def test_in_place_regions_have_keys_of_their_own():
    """What runs for an in-place block is `_call_impl`, not `block(...)`:
    its key says so, and compile_regions' keys stay as they were."""
    import torch

    from kcache.keys import block_key as pk
    from kcache.keys.make import key_of
    from kcache.keys.fields import CompileSettings

    block, args = torch.nn.Linear(4, 4), (torch.randn(2, 4),)
    settings = CompileSettings(backend="inductor", mode=None, fullgraph=False, dynamic=None, options={})
    plain = pk.region_fields(block, args, {}, settings)
    assert pk.region_fields(block, args, {}, settings, entry="call") == plain
    in_place = pk.region_fields(block, args, {}, settings, entry="call_impl")
    assert in_place["region"] != plain["region"] and '"entry":"call_impl"' in in_place["region"]
    assert key_of(in_place, "x")[0] != key_of(plain, "x")[0]
    # The entry's code is part of the key: a stored function whose entry
    # moved or changed (its inlined-source check would fail every load)
    # is not looked up again.
    from kcache.precompiled import entries

    assert entries.source_digest("call") != entries.source_digest("call_impl")
    sourced = pk.region_fields(block, args, {}, settings, entry_source=entries.source_digest("call"))
    assert key_of(sourced, "x")[0] != key_of(plain, "x")[0]
