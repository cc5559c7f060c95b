"""torch.compile's module wrapper, for kcache's precompiled blocks to be one.

Accelerate (`is_compiled_module`, `has_compiled_regions`,
`extract_model_from_parallel`, hence `unwrap_model` and every save path of
Trainer), transformers and PEFT recognise a compiled module by
`isinstance(m, torch._dynamo.eval_frame.OptimizedModule)` and unwrap it
through `_orig_mod`. kcache.precompiled.PrecompiledBlock subclasses it and
sets up the state OptimizedModule.__init__ sets up, without a Dynamo
context: its forward is kcache's own (docs/compatibility.md).
"""

from __future__ import annotations

import torch
from torch._dynamo.eval_frame import OptimizedModule

# What PrecompiledBlock relies on: the adaptor's checklist (required()) and
# so tests/python/compile/test_torch_adaptor.py fail loudly when a release
# drops one.
OPTIMIZED_MODULE_ATTRIBUTES = ("_opt_mod_attributes", "training", "__getattr__", "__setattr__",
                               "__delattr__", "__dir__", "__call__")


def required() -> dict[str, bool]:
    names = {f"torch._dynamo.eval_frame.OptimizedModule.{a}": a in vars(OptimizedModule)
             for a in OPTIMIZED_MODULE_ATTRIBUTES}
    # __init__'s order: `_orig_mod` set before nn.Module.__init__ (read by
    # __getattr__), the flag the `training` setter reads.
    names["torch._dynamo.eval_frame.OptimizedModule._super_module_initialized"] = (
        "_super_module_initialized" in OptimizedModule._opt_mod_attributes)
    return names


def init_optimized_module(self: OptimizedModule, mod: torch.nn.Module) -> None:
    """OptimizedModule.__init__'s state for `self` wrapping `mod`: `mod`
    registered as the submodule `_orig_mod` and `training` mirrored from it.
    No dynamo_ctx and no per-instance `forward`: the subclass's forward runs."""
    # As OptimizedModule.__init__: `_orig_mod` first (attribute access goes
    # through it), then nn.Module's own state, then the registered submodule.
    object.__setattr__(self, "_orig_mod", mod)
    self._super_module_initialized = False
    torch.nn.Module.__init__(self)
    self._super_module_initialized = True
    self._orig_mod = mod
