"""Precompiled regions for blocks compiled in place (nn.Module.compile()).

Accelerate's DeepSpeed path (compile_regions_deepspeed) and, from
Accelerate 1.12 on, its FSDP2 path (compile_regions_fsdp2) keep the model's
own module objects and compile each block in place. PyTorch does that by
setting the block's `_compiled_call_impl` to `torch.compile(block._call_impl)`;
`nn.Module.__call__` runs it instead of `_call_impl`. kcache sets it to a
function that runs the block's region's precompiled function
(kcache.precompiled, entry "call_impl": the same `_call_impl` compiled), so
these paths skip Dynamo on a warm start too.

A block with module hooks on it or on a submodule (fully_shard and ZeRO-3
add them; so may the job, before or after compiling) takes the traced path,
as `nn.Module.compile()` would, said once with the reason: the hooks are
checked on every call (kcache.precompiled.region.PrecompiledRegion.run), since
they change what `_call_impl` runs.
"""

from __future__ import annotations

from typing import Any

import torch

from .region import PrecompiledRegion


def install(block: torch.nn.Module, region: PrecompiledRegion) -> None:
    """Makes `block(...)` run `region`'s precompiled function for it (or the
    traced path, when the block or a submodule has hooks: region.run)."""
    slots: dict[str, Any] = {"ready": {}}

    def call_block(*args: Any, **kwargs: Any):
        return region.run(block, slots, args, kwargs)

    block._compiled_call_impl = call_block
