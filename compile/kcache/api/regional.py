"""kcache.compile_regions and kcache.compile: the one call a training job makes.

compile_regions is a drop-in for accelerate.utils.compile_regions: the same
region rule, the same return conventions (a new module sharing the original's
parameters, with `_orig_mod` pointing at the original) and the same
torch.compile keyword arguments. compile_regions_in_place compiles the
blocks themselves (Accelerate's DeepSpeed and FSDP2 variants). Both walk the
model with one skeleton (_each_block) and differ only in what they do to a
block.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from kcache import _torch_adaptor as adaptor
from kcache.precompiled import PrecompiledBlock, in_place

from .compiler import Compiler
from .rebind import rebind_instance_methods
from .regions import find_regions, has_repeated_blocks, is_repeated_blocks


def _each_block(module: torch.nn.Module, compile_kwargs: dict[str, Any],
                one: Callable[[Compiler, torch.nn.Module, str], torch.nn.Module | None],
                rebuild: bool) -> torch.nn.Module | None:
    """Calls `one(compiler, block, region name)` for every block: each member
    of a repeated list, and each module around them (a region of one block
    each). With `rebuild`, returns the model with every block replaced by
    what `one` returned (shallow copies of the modules above the blocks,
    sharing their parameters); else changes nothing around the blocks."""
    compiler = Compiler(compile_kwargs)
    regions = find_regions(module)
    names = {id(module.get_submodule(m)): r.name for r in regions for m in r.members}
    adaptor.ensure_recompile_limit(sum(r.count for r in regions))

    def block(sub: torch.nn.Module):
        return one(compiler, sub, names.get(id(sub), type(sub).__name__))

    def walk(m: torch.nn.Module):
        if is_repeated_blocks(m):
            done = [block(sub) for sub in m]
            return torch.nn.ModuleList(done) if rebuild else None
        if not has_repeated_blocks(m):
            return block(m)
        if not rebuild:
            for child in m.children():
                walk(child)
            return None
        new = m.__class__.__new__(m.__class__)
        new.__dict__.update(m.__dict__)
        new._modules = {}
        for name, child in m.named_children():
            new.add_module(name, walk(child))
        rebind_instance_methods(new, m)
        return new

    return walk(module)


def _wrapped(compiler: Compiler, block: torch.nn.Module, name: str) -> torch.nn.Module:
    region = compiler.precompiled(name, traced=lambda b, n=name: compiler.traced(b, n))
    return compiler.traced(block, name) if region is None else PrecompiledBlock(block, region)


def _in_place(compiler: Compiler, block: torch.nn.Module, name: str) -> None:
    region = compiler.precompiled(name, traced=lambda b, n=name: compiler.traced_call_impl(b, n),
                                  entry="call_impl")
    if region is None:
        compiler.traced_in_place(block, name)
    else:
        in_place.install(block, region)


def compile_regions(module: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
    """Regional compilation through kcache; see accelerate.utils.compile_regions.

    Repeated blocks take the precompiled path (kcache.precompiled: no Dynamo
    trace on a warm start, one trace per region cluster-wide on a cold one)
    unless KCACHE_PRECOMPILED=0; a region that cannot falls back to the
    traced path (Dynamo traces each block, kcache supplies what it
    compiles), said once with the reason."""
    new_module = _each_block(module, compile_kwargs, _wrapped, rebuild=True)
    if "_orig_mod" not in new_module.__dict__:
        new_module.__dict__["_orig_mod"] = module
    return new_module


def compile_regions_in_place(module: torch.nn.Module, **compile_kwargs: Any) -> None:
    """Like compile_regions, but compiling the blocks themselves, as
    nn.Module.compile() does (Accelerate's DeepSpeed and FSDP2 variants: the
    engine keeps its module objects). Blocks take the precompiled path
    (kcache.precompiled.in_place) unless KCACHE_PRECOMPILED=0 or a block has
    module hooks; those are compiled as nn.Module.compile() would."""
    _each_block(module, compile_kwargs, _in_place, rebuild=False)


def compile(model: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
    """The whole model as one region, through the same machinery."""
    return Compiler(compile_kwargs).traced(model, type(model).__name__)
