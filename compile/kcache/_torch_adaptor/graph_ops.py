"""Two small pieces of PyTorch's private API that kcache's key code needs:
telling an ATen operator (OpOverload / OpOverloadPacket, which prints as
`aten.add.Tensor`) from any other call target, and resetting Dynamo's
caches before a one-off trace."""

from __future__ import annotations

from typing import Any

import torch


def is_aten_op(obj: Any) -> bool:
    """An operator overload or its packet (torch.ops.aten.add, .Tensor)."""
    return isinstance(obj, torch._ops.OpOverload | torch._ops.OpOverloadPacket)


def reset_dynamo() -> None:
    """Forgets every frame Dynamo compiled in this process."""
    torch._dynamo.reset()


def required() -> dict[str, bool]:
    return {
        "torch._ops.OpOverload / OpOverloadPacket": hasattr(torch._ops, "OpOverload")
        and hasattr(torch._ops, "OpOverloadPacket"),
        "torch._dynamo.reset": callable(getattr(torch._dynamo, "reset", None)),
        "torch._C._current_graph_task_id": callable(getattr(torch._C, "_current_graph_task_id", None)),
    }


def in_backward() -> bool:
    """Whether this thread is running autograd's backward (a checkpointed
    block's forward is called again there)."""
    return torch._C._current_graph_task_id() != -1
