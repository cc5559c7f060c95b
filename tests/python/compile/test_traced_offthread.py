"""The traced path's compile off the training thread (issue 51;
kcache/traced/offthread.py, docs/cold-start.md "The traced path off the
thread"): blocks whose hooks inside the forward break them into graphs
(DeepSpeed ZeRO 3's; here a graph-breaking pre-hook on a submodule of each
block) run each graph eagerly while the rank's compile worker compiles the
carried graph, then switch; against a real kcache-server, real
torch.compile, a real compile worker.

- Cold: the rank's PyTorch counters show every switched graph loaded from
  AOTAutograd's and the FX-graph cache (no miss in the rank), the worker
  compiled (its compile seconds, its kernel builds: the positive control),
  the server counts the rank's eager calls and switches; losses those of an
  eager copy to 1e-4. A restart: no eager phase, nothing built, hits.
- A worker stopped in a graph's compile (past its deadline): the graphs
  stay eager, the job finishes with eager's losses, the faults are counted.
- The pieces, in process: carrying keeps kcache's key and the graph's
  output, over generated graphs; graphs that cannot be carried (dynamic
  shapes, a tensor-subclass input) say why.

The false-hit fuzzer's traced run with a background cold start
(test_false_hit_fuzz.py) covers regions compiled by the worker and used by
other processes under run-time changes.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.utils.checkpoint

from test_cold_background import assert_close_to_eager, finish, served, start  # the cold-start tests' job

TRACED = ("--submodule-hooks",)


def traced_jobs(out: dict) -> list[dict]:
    return [j for j in out["timeline"] if j["path"] == "traced"]


@pytest.mark.slow
def test_traced_graphs_run_eagerly_while_the_worker_compiles_them_then_switch(tmp_path, cxx_wrapper):
    """A graph-breaking hook on a submodule of each block. Also what
    DeepSpeed ZeRO 3 leaves on the Embedding (hooks of its own,
    an attribute holding a local class): it cannot go to the worker, so its
    precompiled region compiles on the training thread, fails to package
    and records that; the restart reads the record and compiles nothing."""
    # Two small kinds of block, one of each (the test command's time budget:
    # what this proves does not depend on the model).
    flags = (*TRACED, "--unpicklable-embedding", "--model", "two-kinds", "--layers", "1")
    with served(tmp_path) as srv:
        cold = finish(start(tmp_path, cxx_wrapper, "cold", srv.url, *flags, "--steps", "2", "--until-switched"),
                      tmp_path, "cold")
        k = cold["kcache"]
        traced = traced_jobs(cold)
        assert cold["mode"] == "background"
        assert len(traced) >= 3, cold["timeline"]  # the hook broke each block into graphs
        assert all(j["state"] == "switched" and j["by"] == "this rank's worker" for j in traced), traced
        assert all(j["eager_calls"] >= 1 for j in traced)
        assert 0 not in cold["compiled_steps"] and cold["compiled_steps"]
        assert k["background_faults"] == 0 and k["background_refusals"] == 1
        assert "does not copy to another process" in cold["stderr"]
        # Positive control: the worker compiled, off this process...
        assert k["background_compile_seconds"] > 0 and cold["builds"]
        # ...and this process loaded each switched graph from PyTorch's own
        # caches: AOTAutograd's entry and the FX graphs. The one miss is the
        # Embedding's precompiled compile here (the refusal above).
        aot, ind = cold["aot_autograd"], cold["inductor"]
        assert aot.get("autograd_cache_hit", 0) >= len(traced), aot
        assert aot.get("autograd_cache_miss", 0) == 1 and aot.get("autograd_cache_bypass", 0) == 0, aot
        assert ind.get("fxgraph_cache_hit", 0) >= len(traced), ind
        m = srv.metrics()
        assert m["kcache_eager_block_calls_total"] == k["eager_block_calls"]
        assert m["kcache_regions_switched_total"] == k["regions_switched"]
        assert_close_to_eager(cold)

        leases = m["kcache_leases_granted_total"]
        warm = finish(start(tmp_path, cxx_wrapper, "warm", srv.url, *flags, "--steps", "3"), tmp_path, "warm")
        w = warm["kcache"]
        assert w["eager_block_calls"] == 0 and w["background_jobs"] == 0 and w["background_refusals"] == 0
        assert warm["compiled_steps"] == [0, 1, 2] and warm["builds"] == []
        assert w["hits_server"] >= 1 and w["misses"] == 0 and w["compiles"] == 0
        assert srv.metrics()["kcache_leases_granted_total"] == leases  # nothing compiled anywhere
        assert w["regions_seen"] >= len(traced)  # every graph traced here, each one a hit:
        assert warm["aot_autograd"].get("autograd_cache_hit", 0) >= len(traced)
        assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
        assert_close_to_eager(warm)


@pytest.mark.slow
def test_a_worker_stopped_in_a_graphs_compile_leaves_it_eager_and_the_losses_right(tmp_path, cxx_wrapper):
    """Every host-compiler run held (the CXX wrapper's gate) and a 1 s
    deadline: the worker is stopped in its first compile (the Embedding's
    region, precompiled), its successor in the next one, a traced graph's,
    and so on until no worker is left. Every graph stays eager to the end."""
    gate = tmp_path / "gate"
    gate.write_text("held")
    try:
        with served(tmp_path) as srv:
            out = finish(start(tmp_path, cxx_wrapper, "deadline", srv.url, *TRACED, "--model", "two-kinds",
                               "--layers", "2", "--steps", "3", "--until-switched",
                               KCACHE_TEST_CXX_GATE=str(gate), KCACHE_WORKER_DEADLINE_S="1"),
                         tmp_path, "deadline")
    finally:
        gate.unlink()  # a stopped worker's host-compiler run, held at the gate, then ends
    k = out["kcache"]
    traced = traced_jobs(out)
    assert traced and all(j["state"] == "orphaned" for j in traced), out["timeline"]
    assert any("KCACHE_WORKER_DEADLINE_S" in j["note"] for j in traced), traced  # stopped in its compile
    assert k["background_faults"] >= 2 and k["regions_switched"] == 0
    assert out["compiled_steps"] == [] and k["eager_block_calls"] >= 6
    assert_close_to_eager(out)


# ---- the pieces, in process ----

class _Recorder:
    def __init__(self) -> None:
        self.graphs: list = []

    def __call__(self, gm, example_inputs):
        self.graphs.append((gm, list(example_inputs)))
        return gm.forward


class _Scale(torch.autograd.Function):
    """A custom autograd.Function (as DeepSpeed ZeRO 3's linear): Dynamo
    records it as a higher-order operator with forward and backward bodies."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, grad):
        return grad * 2.0


def _random_block(rng: random.Random, dim: int) -> torch.nn.Module:
    """A block of 2 to 5 random steps, some behind a graph-breaking hook:
    modules, functions, methods, an ATen operator, a custom autograd.Function
    and activation checkpointing (graphs with subgraphs)."""
    steps = []
    for _ in range(rng.randint(2, 5)):
        kind = rng.choice(["linear", "norm", "act", "residual", "softmax", "view", "aten", "function",
                           "checkpoint"])
        steps.append(kind)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(dim, dim, bias=rng.random() < 0.5)
            self.norm = torch.nn.LayerNorm(dim)
            self.out = torch.nn.Linear(dim, dim)
            if rng.random() < 0.7:
                self.out.register_forward_pre_hook(lambda m, a: torch._dynamo.graph_break())

        def forward(self, x):
            h = x
            for kind in steps:
                if kind == "linear":
                    h = self.lin(h)
                elif kind == "norm":
                    h = self.norm(h)
                elif kind == "act":
                    h = torch.nn.functional.gelu(h) * 1.5
                elif kind == "residual":
                    h = h + x
                elif kind == "softmax":
                    h = h.softmax(dim=-1)
                elif kind == "aten":
                    h = torch.ops.aten.mul.Tensor(h, h)
                elif kind == "function":
                    h = _Scale.apply(h)
                elif kind == "checkpoint":
                    h = torch.utils.checkpoint.checkpoint(self.norm, h, use_reentrant=False)
                else:
                    h = h.view(h.shape[0], -1, dim).transpose(0, 1).contiguous().transpose(0, 1)
            return self.out(h) + x

    return Block()


def test_carried_graphs_key_and_compute_like_the_traced_ones():
    """Generated blocks (20, fixed seed): every graph Dynamo captures, carried
    and landed again, has the traced graph's kcache key and, run on the
    traced graph's inputs, its output."""
    from kcache import _torch_adaptor as adaptor
    from kcache.keys.fields import CompileSettings
    from kcache.keys.graph_key import region_key

    rng = random.Random(51)
    checked = 0
    for case in range(20):
        torch.manual_seed(case)
        block = _random_block(rng, 16)
        rec = _Recorder()
        x = torch.randn(2, 4, 16, requires_grad=rng.random() < 0.7)
        torch._dynamo.reset()
        with torch.set_grad_enabled(rng.random() < 0.8):
            torch.compile(block, backend=rec)(x)
            for gm, inputs in rec.graphs:
                blob = adaptor.ship_graph(gm, inputs)
                landed, fakes, _ = adaptor.land_graph(blob)
                want = region_key(gm, inputs, "b", CompileSettings())[0]
                assert region_key(landed, fakes, "b", CompileSettings())[0] == want, (case, gm.code)
                for a, b in zip(landed(*inputs), gm(*inputs)):
                    assert torch.equal(a, b), (case, gm.code)
                checked += 1
    assert checked >= 25  # graphs, breaks included


def test_a_graph_that_cannot_be_carried_says_why():
    from kcache import _torch_adaptor as adaptor

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x).relu()

    rec = _Recorder()
    torch._dynamo.reset()
    torch.compile(Block(), backend=rec, dynamic=True)(torch.randn(3, 8))
    (gm, inputs), = rec.graphs
    with pytest.raises(adaptor.NotShippable, match="not a plain tensor"):
        adaptor.ship_graph(gm, inputs)

    class Sub(torch.Tensor):
        pass

    with pytest.raises(adaptor.NotShippable, match="Sub"):
        adaptor.ship_graph(gm, [torch.randn(3, 8).as_subclass(Sub)])


def test_a_graph_that_cannot_switch_stays_eager_and_says_so(caplog):
    """The switch itself failing (a bundle that will not compile here) costs
    nothing but speed: the graph keeps running eagerly, the fault counted."""
    from kcache.state import counters
    from kcache.traced.offthread import EagerUntilStored

    class Landed:  # the coordinator's answer: the region is stored
        def ready(self, key, in_backward):
            return True

    class Backend:
        region_name = "Block"

        def switch(self, *args):
            raise RuntimeError("a planted failure")

    calls = []

    def graph(x):
        calls.append(x)
        return (x * 2,)

    before = counters.get().background_faults
    run = EagerUntilStored(Backend(), Landed(), graph, "ab" * 32, "ab" * 32, "{}", b"", "cpu")
    with caplog.at_level("WARNING", logger="kcache"):
        out1, = run(torch.ones(2))
        out2, = run(torch.ones(2))
    assert torch.equal(out1, torch.full((2,), 2.0)) and torch.equal(out2, out1) and len(calls) == 2
    assert "could not switch" in caplog.text and "a planted failure" in caplog.text
    assert counters.get().background_faults == before + 1


def test_a_bundle_carrying_another_computation_is_refused(tmp_path):
    """A bundle stored under graph B's key whose carried graph is graph A's
    (a forged or broken upload: the key is right, the bytes verify): the
    restoring process keys the carried graph before using it, refuses the
    bundle and compiles B itself; B's output, not A's."""
    from kcache import _core
    from kcache import _torch_adaptor as adaptor
    from kcache.keys.fields import CompileSettings
    from kcache.state import counters
    from kcache.traced import offthread
    from kcache.traced.backend import RegionBackend

    from kc_testing import seed_node

    def captured(fn):
        rec = _Recorder()
        torch._dynamo.reset()
        torch.compile(fn, backend=rec)(torch.randn(4, 8))
        (gm, inputs), = rec.graphs
        return gm, inputs

    gm_a, in_a = captured(lambda x: (x * 2.0 + 1.0).relu())
    gm_b, in_b = captured(lambda x: (x * 3.0 + 1.0).relu())
    seed_node(tmp_path / "node")
    store = _core.Client(local_dir=str(tmp_path / "node"))
    backend = RegionBackend("Block", CompileSettings(), store)
    key_a, key_b = backend.key_for(gm_a, in_a)[0], backend.key_for(gm_b, in_b)[0]
    assert key_a != key_b
    explanation_b = backend.key_for(gm_b, in_b)[1]
    offthread.compile_and_store(store, key_b, explanation_b, adaptor.ship_graph(gm_a, in_a), CompileSettings())
    assert store.lookup(key_b) is not None  # the plant is served (so this test can fail)

    before = counters.get().restore_failures
    compiled = backend(gm_b, in_b)
    assert counters.get().restore_failures == before + 1
    x = torch.randn(4, 8)
    assert torch.equal(compiled(x)[0], gm_b(x)[0]) and not torch.equal(compiled(x)[0], gm_a(x)[0])
