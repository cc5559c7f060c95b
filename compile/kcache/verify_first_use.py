"""KCACHE_VERIFY_FIRST_USE=1: check each restored region once against eager.

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
import os
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger("kcache")


def enabled() -> bool:
    return os.environ.get("KCACHE_VERIFY_FIRST_USE") == "1"


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
