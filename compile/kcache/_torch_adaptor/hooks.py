"""The hooks a module call runs (a block with hooks takes the traced path)."""

from __future__ import annotations

import torch


# kcache's precompiled function for a block is compiled from `block(...)`
# (compile_regions) or `_call_impl` (blocks compiled in place), with the
# hooks the block and its submodules had then; a block with hooks
# (fully_shard's, ZeRO-3's, the job's own) takes the traced path instead.
_MODULE_HOOKS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks",
                 "_forward_hooks_with_kwargs", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs")
_GLOBAL_HOOKS = ("_global_backward_pre_hooks", "_global_backward_hooks",
                 "_global_forward_hooks", "_global_forward_pre_hooks")


def module_hooks(module: torch.nn.Module) -> list[str]:
    """The hooks a call of `module` runs: its own hook kinds (`_forward_hooks`),
    each submodule's as `path._forward_hooks`, and the global ones.

    A precompiled function was traced with the hooks the block had then
    (Dynamo inlines a submodule's hooks into the graph), and PyTorch keeps
    no guard on them: a block with any hook takes the traced path instead
    (kcache.precompiled), checked on every call since hooks come and go."""
    from torch.nn.modules import module as nn_module

    found = [h for h in _GLOBAL_HOOKS if getattr(nn_module, h, None)]
    for path, sub in module.named_modules():
        found += [f"{path}.{h}" if path else h for h in _MODULE_HOOKS if getattr(sub, h, None)]
    return found


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
