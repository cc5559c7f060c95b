"""Regions whose graphs PyTorch leaves out of AOTAutograd's cache.

The kinds of graph DeepSpeed ZeRO 3's regions are made of
(docs/distributed.md): a backward with no op (it only passes the gradient
on), an inference graph with no op left after AOTAutograd, a graph that
calls a custom autograd.Function (ZeRO 3's Linear), and two equal graphs
after graph breaks that read their inputs from other frames (one kcache
key, two AOTAutograd keys). Stock PyTorch 2.13 saves no AOTAutograd entry
for the first three (the no-op one records nothing at all), and kcache's
in-process reuse of the fourth saved its entry outside any bundle, so every
start missed and traced them again. Now each region's bundle holds its
AOTAutograd entry and the fourth is a variant of its own: a fresh process in
a fresh Inductor directory restores every region with no miss of either
cache (on the code before, the restart showed four AOTAutograd misses, one
bypass and one region not stored), and trains to the same loss.
"""

from __future__ import annotations

import json

import pytest

from kc_testing import PYTHON, python_env
from tiny_job import stored_bundles
from harness.jobs import run_job

JOB = r'''
import json, torch, kcache.api
from kcache import _torch_adaptor as adaptor

class PassOn(torch.nn.Module):      # forward adds; backward only passes the gradient on
    def forward(self, x):
        return x + 1.0

class NoOp(torch.nn.Module):        # under no_grad: nothing left after AOTAutograd
    def forward(self, x):
        return x.contiguous()

class _MatMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.t() @ x

class Custom(torch.nn.Module):      # a custom autograd.Function, as ZeRO 3 wraps Linear
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x):
        return _MatMul.apply(x, self.w)

class TwoAdds(torch.nn.Module):     # graph breaks: two equal graphs fed from other frames
    def forward(self, x):
        a = x.sin()
        torch._dynamo.graph_break()
        b = a + x                   # add(a, x): the resume frame's L['a'], L['x']
        torch._dynamo.graph_break()
        return x + b                # the same graph, from L['x'], L['b']

torch.manual_seed(0)
lin, pass_on, no_op, custom, adds = torch.nn.Linear(8, 8), PassOn(), NoOp(), Custom(), TwoAdds()
for region in (pass_on, no_op, custom, adds):
    kcache.api.compile_regions_in_place(region, backend="inductor")
x = torch.randn(4, 8)
y = adds(custom(pass_on(lin(x))))
with torch.no_grad():
    z = no_op(x)
loss = (y * z).sum()
loss.backward()
print(json.dumps({"loss": loss.item(), "grad": lin.weight.grad.sum().item(),
                  "counters": adaptor.counters(), "kcache": kcache.stats(),
                  "regions": kcache.api.region_outcomes()}))
'''


def run(tmp_path, name):
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"ind-{name}"),
                     OMP_NUM_THREADS="1", TORCHINDUCTOR_COMPILE_THREADS="1",
                     # The traced path, which ZeRO 3's hooked blocks take
                     # (in-place blocks without hooks are precompiled).
                     KCACHE_PRECOMPILED="0")
    out = run_job([PYTHON, "-c", JOB], timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_regions_without_stock_aot_entries_restore_with_no_miss(tmp_path):
    from kcache.artifacts import bundle_io

    cold = run(tmp_path, "cold")
    aot = cold["counters"].get("aot_autograd", {})
    # PassOn, NoOp, Custom, and TwoAdds' three graphs: sin, add, and the add variant.
    assert cold["kcache"]["compiles"] == 6 and cold["kcache"]["bypassed"] == 0, cold["kcache"]
    assert aot.get("autograd_cache_saved", 0) == 6, aot  # stock: 1 (PassOn, NoOp, Custom: none)
    assert aot.get("autograd_cache_bypass", 0) == 0, aot
    manifests = [bundle_io.unpack(p.read_bytes(), p.name).manifest for p in stored_bundles(tmp_path)]
    [variant] = [m for m in manifests if "variant_of" in m["explanation"]]
    assert variant["explanation"]["input_sources"] == "L['x'], L['b']"
    assert all(m["torch_cache_keys"].get("aot_autograd") for m in manifests)

    warm = run(tmp_path, "warm")  # a fresh process, a fresh Inductor cache directory
    aot = warm["counters"].get("aot_autograd", {})
    assert warm["kcache"]["hits_node"] == 6 and warm["kcache"]["compiles"] == 0, warm["kcache"]
    assert aot.get("autograd_cache_hit", 0) == 6, aot
    assert aot.get("autograd_cache_miss", 0) == 0 and aot.get("autograd_cache_bypass", 0) == 0, aot
    assert warm["counters"].get("inductor", {}).get("fxgraph_cache_miss", 0) == 0
    assert (warm["loss"], warm["grad"]) == (cold["loss"], cold["grad"])
    assert [r["key"] for r in warm["regions"]] == [r["key"] for r in cold["regions"]]


def _dynamo_graph(fn, *args):
    import torch

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return graphs[0]


class _Scale:
    """An opaque callable (allow_in_graph): AOTAutogradCache keys it by name
    alone, so a graph whose custom-Function body calls one stays uncached."""
    factor = [2.0]


def test_custom_autograd_flag_only_for_graphs_whose_bodies_are_safe():
    import torch

    from kcache import _torch_adaptor as adaptor

    @torch._dynamo.allow_in_graph
    def opaque(x):
        return x * _Scale.factor[0]

    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

    class UnderAutocast(torch.autograd.Function):  # as ZeRO 3's LinearFunctionForZeroStage3
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu")
        def forward(ctx, x):
            return x * 3

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            return g * 3

    class Opaque(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return opaque(x)

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.randn(4, requires_grad=True)
    assert not adaptor.custom_autograd_cacheable(_dynamo_graph(lambda t: t.sin() + 1, x))
    assert adaptor.custom_autograd_cacheable(_dynamo_graph(lambda t: Plain.apply(t).sin(), x))
    under = _dynamo_graph(lambda t: UnderAutocast.apply(t).sin(), x)
    assert "_enter_autocast" in "".join(m.code for m in under.modules() if isinstance(m, torch.fx.GraphModule))
    assert adaptor.custom_autograd_cacheable(under)
    assert not adaptor.custom_autograd_cacheable(_dynamo_graph(lambda t: Opaque.apply(t).sin(), x))
