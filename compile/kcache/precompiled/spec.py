"""What selects a block's compiled function on each call (its call
signature) and the per-block constants that select a variant."""

from __future__ import annotations

from typing import Any

import torch


def fast_spec(args: tuple, kwargs: dict) -> tuple:
    """A cheap hashable summary of what selects a compiled function: grad
    mode, autocast, and each argument's tensor metadata or plain value."""

    def one(v: Any):
        if isinstance(v, torch.Tensor):
            return (v.shape, v.stride(), v.dtype, v.device.type, v.requires_grad)
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, list | tuple):
            return tuple(one(x) for x in v)
        return type(v)

    autocast = tuple((d, torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")
                     if torch.is_autocast_enabled(d))
    return (torch.is_grad_enabled(), autocast, tuple(one(a) for a in args),
            tuple(sorted((k, one(v)) for k, v in kwargs.items())))


def resolve_path(block: torch.nn.Module, path: str) -> Any:
    """Reads "._modules['attn'].layer_idx" below `block` (a constant the
    kept guards pin per block)."""
    obj: Any = block
    for part in path.replace("._modules['", ".\x00").split("."):
        if not part:
            continue
        if part.startswith("\x00"):
            obj = obj._modules[part[1:].rstrip("']")]
        else:
            obj = getattr(obj, part)
    return obj if obj is None or isinstance(obj, bool | int | float | str) else repr(obj)
