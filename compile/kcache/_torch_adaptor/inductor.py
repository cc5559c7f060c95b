"""Inductor's compile entry point as kcache calls it, its cache directory
and PyTorch's own counters."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator
from typing import Any

import torch


def inductor_cache_dir() -> pathlib.Path:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return pathlib.Path(cache_dir())


def counters() -> dict[str, dict[str, int]]:
    """A copy of PyTorch's own compile counters (torch._dynamo.utils.counters)."""
    from torch._dynamo.utils import counters as c

    return {k: dict(v) for k, v in c.items()}


def inductor_config_patches(mode: str | None, options: dict[str, Any] | None, dynamic: bool | None):
    """The Inductor config a torch.compile(mode=…, options=…) call would apply."""
    patches: dict[str, Any] = {}
    if mode and mode != "default":
        patches.update(torch._inductor.list_mode_options(mode, dynamic))
    if options:
        patches.update(options)
    return patches


def compile_with_inductor(gm, example_inputs, config_patches: dict[str, Any]):
    """Compiles a Dynamo graph exactly as the "inductor" backend would, so
    that everything it produces lands in PyTorch's caches.

    Backward graphs are lowered eagerly (force_non_lazy_backward_lowering) so
    that one region's compile produces all of its artifacts inside one
    recording; the flag is set on hits too, so it cannot split keys. Two
    kinds of graph would otherwise leave no AOTAutograd entry, so that every
    start misses AOTAutograd's cache and traces them again (what DeepSpeed
    ZeRO 3's regions showed, docs/distributed.md): graphs whose forward or
    backward has no op (call_free_graphs_cached) and graphs that call a
    custom autograd.Function (custom_autograd_cacheable). Both are decided
    by the graph alone, identically on a miss and on a hit.
    """
    from torch._inductor.compile_fx import compile_fx

    functorch = {"force_non_lazy_backward_lowering": True}
    if custom_autograd_cacheable(gm):
        functorch["autograd_cache_allow_custom_autograd_functions"] = True
    with torch._functorch.config.patch(**functorch), call_free_graphs_cached():
        return compile_fx(gm, example_inputs, config_patches=config_patches or None)


def input_sources(gm) -> str:
    """Where Dynamo took each graph input from ("L['residual']", …), in order.

    Not part of kcache's key (two graphs that compute the same thing from
    inputs of the same metadata share a key, wherever they come from), but
    part of AOTAutograd's: its cache key hashes the input sources
    (aot_config), so such a graph misses the AOTAutograd entry the first one
    saved (kcache.traced.backend keeps a variant for it)."""
    names = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", None)
        names.append(str(name() if callable(name) else name))
    return ", ".join(names)


class _AtLeastOneCall:
    """torch._dynamo.utils as compile_fx sees it inside call_free_graphs_cached:
    every attribute is the real module's, but count_calls never says 0."""

    def __init__(self, real) -> None:
        self._real = real

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def count_calls(self, graph) -> int:
        return max(1, self._real.count_calls(graph))


@contextlib.contextmanager
def call_free_graphs_cached() -> Iterator[None]:
    """Inductor compiles graphs without ops like any other.

    _compile_fx_inner returns a graph with no call (a backward that only
    passes its gradient on, an inference graph of views and no-ops) as it
    is, before its FX-graph cache runs. That function has no FX-graph cache
    key, and AOTAutograd saves an entry only when the forward and the
    backward both have one (graph_compile._should_save_cache): such a region
    misses AOTAutograd's cache at every start, and one with no op on either
    side records nothing at all (pytorch/pytorch#141790; PyTorch's later fix,
    #186053, does what this does: call-free graphs go through the FX-graph
    cache when AOTAutograd is saving an entry). Compiling such a graph
    generates a function that returns its inputs: no kernel, no host
    compiler. Graphs with ops are untouched, so are their cache keys.
    """
    from torch._inductor import compile_fx as cfx

    real = cfx.dynamo_utils
    if isinstance(real, _AtLeastOneCall):  # nested: already in place
        yield
        return
    cfx.dynamo_utils = _AtLeastOneCall(real)
    try:
        yield
    finally:
        cfx.dynamo_utils = real


def custom_autograd_cacheable(gm) -> bool:
    """True when the graph calls a custom autograd.Function
    (autograd_function_apply) and AOTAutogradCache may cache it.

    AOTAutogradCache bypasses such graphs unless
    autograd_cache_allow_custom_autograd_functions is set (pytorch/pytorch#149751:
    the higher-order op is pure in the Dynamo graph's inputs, kept behind a
    flag while PyTorch rolls it out); the FX-graph cache already caches
    their forward and backward. DeepSpeed ZeRO 3 routes every Linear through
    one (LinearFunctionForZeroStage3). The flag is set only for graphs whose
    forward and backward bodies pass AOTAutogradCache's own node check too
    (which PyTorch 2.13 applies to the outer graph only: a body calling an
    opaque callable would be keyed by its name alone, pytorch/pytorch#194658),
    except for autocast's enter and exit, whose every argument is a constant
    in the graph's code and so in the key (the allowlist gap of
    pytorch/pytorch#191106; ZeRO 3's backward runs under
    autocast_custom_bwd). Any other graph's AOTAutograd key stays as it was.
    """
    from torch._functorch._aot_autograd import autograd_cache as ac
    from torch._functorch.autograd_function import AutogradFunctionApply

    autocast = {torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast}

    def bodies_safe(module) -> bool:
        for node in module.graph.nodes:
            try:
                ac.check_node_safe(node)
            except ac.BypassAOTAutogradCache:
                target = getattr(node, "target", None)
                if not (isinstance(target, AutogradFunctionApply) or target in autocast):
                    return False
            if node.op == "get_attr":
                sub = getattr(module, node.target, None)
                if isinstance(sub, torch.fx.GraphModule) and not bodies_safe(sub):
                    return False
        return True

    graph = getattr(gm, "graph", None)
    if graph is None or not any(n.op == "call_function" and isinstance(n.target, AutogradFunctionApply)
                                for n in graph.nodes):
        return False
    return bodies_safe(gm)


def compile_uncached(gm, example_inputs, config_patches: dict[str, Any]):
    """Compiles with every PyTorch cache bypassed (a refused region's fresh compile)."""
    with torch._inductor.config.patch(force_disable_caches=True):
        return compile_with_inductor(gm, example_inputs, config_patches)


def rewrite_fx_entries(mega_cache: bytes, transform) -> bytes:
    """Unpickles each FX-graph entry in Mega-Cache bytes, lets `transform`
    mutate it, and serializes the result again.

    Test support: it is how tests plant a valid, correctly keyed bundle whose
    code was altered, to prove that verify-on-first-use refuses it.
    """
    import pickle

    from torch.compiler._cache import CacheArtifactManager

    artifacts = CacheArtifactManager.deserialize(mega_cache)
    with CacheArtifactManager.with_fresh_cache():
        for artifact_type, items in artifacts.items():
            for artifact in items:
                content = artifact.content
                if artifact_type == "inductor":
                    entry = pickle.loads(content)
                    transform(entry)
                    content = pickle.dumps(entry)
                CacheArtifactManager.record_artifact(artifact_type, artifact.key, content)
        data, _info = CacheArtifactManager.serialize()
    return data
