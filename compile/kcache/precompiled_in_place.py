"""Precompiled regions for blocks compiled in place (nn.Module.compile()).

Accelerate's DeepSpeed path (compile_regions_deepspeed) and, from
Accelerate 1.12 on, its FSDP2 path (compile_regions_fsdp2) keep the model's
own module objects and compile each block in place. PyTorch does that by
setting the block's `_compiled_call_impl` to `torch.compile(block._call_impl)`;
`nn.Module.__call__` runs it instead of `_call_impl`. kcache sets it to a
function that runs the block's region's precompiled function
(kcache.precompiled, entry "call_impl": the same `_call_impl` compiled), so
these paths skip Dynamo on a warm start too.

A block with module hooks (fully_shard and ZeRO-3 add them; so may the
job, before or after compiling) takes the traced path, as
`nn.Module.compile()` would, said once with the reason: the hooks are
checked on every call, since they change what `_call_impl` runs.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from . import _torch_adaptor as adaptor
from . import counters as stats
from .precompiled import PrecompiledRegion


def install(block: torch.nn.Module, region: PrecompiledRegion) -> None:
    """Makes `block(...)` run `region`'s precompiled function for it."""
    slots: dict[str, Any] = {"ready": {}}

    def call_block(*args: Any, **kwargs: Any):
        hooks = adaptor.module_hooks(block)
        if hooks:
            return _traced(block, region, slots, hooks)(*args, **kwargs)
        return region.run(block, slots, args, kwargs)

    block._compiled_call_impl = call_block


def _traced(block: torch.nn.Module, region: PrecompiledRegion, slots: dict,
            hooks: list[str]) -> Callable:
    traced = slots.get("traced")
    if traced is None:
        why = "the block has module hooks (" + ", ".join(hooks) + ")"
        stats.bump(precompiled_fallbacks=1)
        region.say_once(why, "kcache: region %s: %s; those blocks take the traced path",
                        region.name, why)
        traced = slots["traced"] = region.traced(block)
    return traced
