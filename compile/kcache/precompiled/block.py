"""PrecompiledBlock: the module compile_regions puts where a block was."""

from __future__ import annotations

import copy
from typing import Any

import torch

from kcache import _torch_adaptor as adaptor
from kcache.compat import state_dict_keys

from .region import PrecompiledRegion


class PrecompiledBlock(adaptor.OptimizedModule):
    """A block whose forward runs its region's precompiled function.

    To everything that looks it is the module torch.compile returns: an
    instance of OptimizedModule, the original block as its submodule
    `_orig_mod`, attribute reads and writes passed through to the block,
    `training` mirrored; its state_dict keys are the block's own
    (kcache.compat.state_dict_keys). So Accelerate's
    has_compiled_regions / extract_model_from_parallel (unwrap_model, every
    save path) and PEFT see a compiled region (docs/compatibility.md). It
    has no Dynamo context: its forward is kcache's.
    """

    def __init__(self, block: torch.nn.Module, region: PrecompiledRegion) -> None:
        adaptor.init_optimized_module(self, block)
        state_dict_keys.plain_keys(self)
        self.__dict__["_kc_region"] = region
        self.__dict__["_kc_slots"] = {"ready": {}}

    def forward(self, *args: Any, **kwargs: Any):
        return self.__dict__["_kc_region"].run(self._modules["_orig_mod"], self.__dict__["_kc_slots"],
                                               args, kwargs)

    def __deepcopy__(self, memo: dict) -> "PrecompiledBlock":
        # A copy of the block on the same region (regions are per process,
        # shared by identical blocks); its own first-call state.
        return PrecompiledBlock(copy.deepcopy(self._modules["_orig_mod"], memo), self.__dict__["_kc_region"])

    def __copy__(self) -> "PrecompiledBlock":
        new = PrecompiledBlock.__new__(PrecompiledBlock)
        new.__dict__.update(self.__dict__)
        new.__dict__["_kc_slots"] = {"ready": {}}
        return new

    def __reduce__(self):
        raise TypeError("a kcache precompiled block does not pickle (its region holds the cache client): "
                        "pickle its _orig_mod, or the model accelerate's unwrap_model(..., "
                        "keep_torch_compile=False) returns")

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
