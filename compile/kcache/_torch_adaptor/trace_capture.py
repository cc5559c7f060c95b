"""One Dynamo trace of a block, without running it: the graph's digest and
Dynamo's full guards for it (docs/precompiled.md "Trace checks").

A region whose guards cannot all be made portable (a "traced" row of the
guard table, a source kcache cannot follow) still loads its precompiled
function, but only after the warm process traces one block of each variant
itself: Dynamo's graph of the live objects must have the digest the cold
process recorded for the graph it compiled, and every further block must
pass the guards of that one trace (Dynamo's own guard manager, evaluated
without tracing again). The backend records the graph and raises instead of
running it, so the trace runs no forward: no random numbers drawn, no
buffer updated, nothing Dynamo replays after the graph.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any, Callable

import torch


class _Captured(Exception):
    """Raised by the capturing backend's graph in place of running it."""


def _digest(gm: torch.fx.GraphModule, describe_fn: Callable[[Any], Any]) -> str:
    """The graph's code, plus a description of every Python function it
    calls (an allow_in_graph function appears in the code by name only)."""
    h = hashlib.sha256(gm.code.encode())
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, types.FunctionType):
            h.update(repr(describe_fn(node.target)).encode())
    return h.hexdigest()


def capture_graph(call, args: tuple, kwargs: dict, dynamic: bool | None,
                  describe_fn: Callable[[Any], Any]) -> tuple[str, Any]:
    """(graph digest, guard manager) of one whole-graph Dynamo trace of
    `call(*args, **kwargs)` on a fresh copy of `call` (its own Dynamo cache,
    nothing shared with aot_compile's traces). The guard manager's
    check({"block": ..., "args": ..., "kwargs": ...}) says whether another
    block would get the same graph. Raises RuntimeError when Dynamo cannot
    trace it whole."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    from .precompiled import forget_automatic_dynamic

    fresh = types.FunctionType(call.__code__.replace(), call.__globals__, call.__name__,
                               call.__defaults__, call.__closure__)
    graphs: list[str] = []

    def backend(gm, _example_inputs):
        graphs.append(_digest(gm, describe_fn))

        def refuse(*_a, **_k):
            raise _Captured()

        return refuse

    forget_automatic_dynamic(fresh)
    compiled = torch.compile(fresh, backend=backend, fullgraph=True, dynamic=dynamic)
    try:
        compiled(*args, **kwargs)
    except _Captured:
        pass
    else:
        raise RuntimeError("Dynamo produced no graph for the block")
    entries = _debug_get_cache_entry_list(fresh.__code__)
    if len(graphs) != 1 or len(entries) != 1:
        raise RuntimeError(f"{len(graphs)} graphs and {len(entries)} guard sets from one trace")
    return graphs[0], entries[0].guard_manager


def required() -> dict[str, bool]:
    from torch._dynamo import eval_frame

    return {"torch._dynamo.eval_frame._debug_get_cache_entry_list":
            hasattr(eval_frame, "_debug_get_cache_entry_list")}
