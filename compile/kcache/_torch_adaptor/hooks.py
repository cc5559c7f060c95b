"""The hooks a module call runs (a block with hooks takes the traced path)."""

from __future__ import annotations

import torch


# A block compiled in place runs through `_compiled_call_impl`, which
# nn.Module.__call__ runs instead of `_call_impl` (nn.Module.compile()).
# kcache's precompiled function for it is compiled from `_call_impl`, with
# the hooks the block had then; a block with hooks (fully_shard's, ZeRO-3's)
# takes the traced path instead (kcache.precompiled_in_place).
_MODULE_HOOKS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks",
                 "_forward_hooks_with_kwargs", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs")
_GLOBAL_HOOKS = ("_global_backward_pre_hooks", "_global_backward_hooks",
                 "_global_forward_hooks", "_global_forward_pre_hooks")


def module_hooks(module: torch.nn.Module) -> list[str]:
    """The kinds of hooks a call of `module` runs: its own and the global ones."""
    from torch.nn.modules import module as nn_module

    return [h for h in _MODULE_HOOKS if getattr(module, h, None)] + \
        [h for h in _GLOBAL_HOOKS if getattr(nn_module, h, None)]


def required() -> dict[str, bool]:
    import inspect

    from torch.nn.modules import module as nn_module

    probe = torch.nn.Module()
    return {"torch.nn.Module hook dicts (" + ", ".join(_MODULE_HOOKS) + ")":
            all(isinstance(getattr(probe, h, None), dict) for h in _MODULE_HOOKS),
            "torch.nn.modules.module global hook dicts": all(
                isinstance(getattr(nn_module, h, None), dict) for h in _GLOBAL_HOOKS),
            "torch.nn.Module._wrapped_call_impl runs _compiled_call_impl":
            "self._compiled_call_impl(" in inspect.getsource(torch.nn.Module._wrapped_call_impl)}
