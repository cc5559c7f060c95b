"""Instance-level methods of a copied module pointed at the copy."""

from __future__ import annotations

from functools import partial
from types import MethodType
from typing import Any

import torch


def rebind_instance_methods(new: torch.nn.Module, old: torch.nn.Module) -> None:
    """Points instance-level bound methods and partials copied from `old`
    at `new`, as Accelerate's compile_regions does (its
    _rebind_module_methods).

    Accelerate's mixed precision replaces `model.forward` with a method bound
    to the model (autocast around the class's forward), and its hooks
    install a partial `forward` and a bound `_old_forward`. Copying __dict__
    would keep them bound to the *original* model, whose blocks are not
    compiled, so the job would silently run uncompiled (accelerate#4188,
    #4253). Rebinding makes the wrapper call the compiled twin.
    """
    def rebind(value: Any) -> Any:
        if isinstance(value, MethodType) and value.__self__ is old:
            return MethodType(value.__func__, new)
        if isinstance(value, partial):
            args = tuple(new if a is old else a for a in value.args)
            kwargs = {k: new if a is old else a for k, a in value.keywords.items()}
            rebound = partial(rebind(value.func), *args, **kwargs)
            rebound.__dict__.update(value.__dict__)
            if hasattr(value, "__wrapped__"):
                rebound.__wrapped__ = rebind(value.__wrapped__)
            return rebound
        return value

    for name, value in list(new.__dict__.items()):
        new.__dict__[name] = rebind(value)
