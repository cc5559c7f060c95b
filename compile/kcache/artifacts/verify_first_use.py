"""KCACHE_VERIFY_FIRST_USE=1: check each restored region once against eager.

Precompiled regions (kcache.precompiled) are checked too, forward and
backward: precompiled_mismatch() below; a mismatch sends the variant's
blocks to the traced path and drops the node tier's copy.

A restored artifact is code every rank runs; a bad but valid one (a compiler
bug, signed in good faith) passes every checksum and signature. With this
switch the first call of each restored region in a process also runs the
region's Dynamo graph eagerly on copies of the same inputs and compares the
forward outputs. On a mismatch the region is refused: it is compiled afresh
with PyTorch's caches bypassed, the bad bundle is reported (and dropped from
the node tier by the caller's `on_mismatch`), and the fresh result is
returned. The backward is not compared (it runs later, outside this call).

This is a check of results, not a defence against a planted bundle: by the
time the first call is compared, the bundle's pickled entries have been
unpickled and its kernels loaded, so code in it has already run, and a
malicious bundle can as well compute the right forward. What keeps planted
bundles out is a signature check (`KCACHE_TRUSTED_KEYS`, docs/security.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from kcache import settings

log = logging.getLogger("kcache")


def enabled() -> bool:
    return settings.enabled("KCACHE_VERIFY_FIRST_USE")


def _tolerance(t: torch.Tensor) -> tuple[float, float]:
    if t.dtype in (torch.bfloat16, torch.float16):
        return 2e-2, 2e-2
    return 1e-4, 1e-5


def outputs_match(got: Any, expected: Any) -> bool:
    if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor):
        if got.shape != expected.shape or got.dtype != expected.dtype:
            return False
        if not got.is_floating_point():
            return torch.equal(got, expected)
        rtol, atol = _tolerance(got)
        return torch.allclose(got.detach(), expected.detach(), rtol=rtol, atol=atol, equal_nan=True)
    if isinstance(got, list | tuple) and isinstance(expected, list | tuple):
        return len(got) == len(expected) and all(outputs_match(a, b) for a, b in zip(got, expected))
    return type(got) is type(expected) and (not isinstance(got, float | int) or got == expected)


def _clone(a: Any) -> Any:
    return a.detach().clone() if isinstance(a, torch.Tensor) else a


def wrap(compiled: Callable, eager: Callable, recompile: Callable[[], Callable],
         on_mismatch: Callable[[], None]) -> Callable:
    """`compiled`, checked against `eager` on its first call.

    Dynamo calls a backend's result with the graph inputs as positional
    arguments (Inductor's result accepts that too), so the wrapper does.
    """
    state: dict[str, Any] = {"impl": compiled, "checked": False}

    def call(*args):
        if state["checked"]:
            return state["impl"](*args)
        state["checked"] = True
        with torch.no_grad():
            expected = eager(*[_clone(a) for a in args])
        reference_inputs = [_clone(a) for a in args]
        out = compiled(*args)
        if outputs_match(out, expected):
            return out
        log.error("kcache: restored region disagrees with eager on first use; refusing it")
        on_mismatch()
        state["impl"] = recompile()
        return state["impl"](*reference_inputs)

    return call


def _has_active_dropout(block: torch.nn.Module) -> bool:
    return block.training and any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0
                                  for m in block.modules())


def _fresh(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return a.detach().clone().requires_grad_(a.requires_grad)
    return a


def _forward_backward(run: Callable, block: torch.nn.Module, args: tuple, kwargs: dict):
    """Outputs, and the gradients of a fixed projection of them with respect
    to the parameters and the floating inputs that require grad."""
    xs = tuple(_fresh(a) for a in args)
    kws = {k: _fresh(v) for k, v in kwargs.items()}
    out = run(*xs, **kws)
    flat = [t for t in (out if isinstance(out, list | tuple) else [out])
            if isinstance(t, torch.Tensor) and t.requires_grad]
    wrt = [p for p in block.parameters() if p.requires_grad] + [
        a for a in (*xs, *kws.values()) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not flat or not wrt:
        return out, []
    gen = torch.Generator(device="cpu").manual_seed(0)
    loss = sum((t.float() * torch.randn(t.shape, generator=gen).to(t.device)).sum() for t in flat)
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    return out, [torch.zeros_like(w) if g is None else g for g, w in zip(grads, wrt)]


def precompiled_mismatch(compiled: Callable, block: torch.nn.Module, args: tuple,
                         kwargs: dict, eager: Callable | None = None) -> str | None:
    """For a loaded precompiled function's first call in this process: runs
    it and the block eagerly on copies of the same inputs, forward and
    backward (gradients of a fixed random projection of the outputs, with
    respect to the parameters and the inputs that require grad), and says
    what differs; None when both agree, or "skipped: ..." when they cannot
    be compared (dropout active in training draws from another random
    stream in Inductor's code than in eager). `eager`: the block's call
    (default `_call_impl`) or what the compiled function stands for."""
    if _has_active_dropout(block):
        return "skipped: dropout is active in training (its random streams differ)"
    rng = torch.random.get_rng_state()
    try:
        eager_out, eager_grads = _forward_backward(eager or block._call_impl, block, args, kwargs)
        got_out, got_grads = _forward_backward(compiled, block, args, kwargs)
    finally:
        torch.random.set_rng_state(rng)
    if not outputs_match(got_out, eager_out):
        return "forward outputs differ from eager"
    if not outputs_match(list(got_grads), list(eager_grads)):
        return "gradients differ from eager"
    return None
