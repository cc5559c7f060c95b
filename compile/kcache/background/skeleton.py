"""What a compile worker is sent to build a block's region, and how it
rebuilds it: the block without its weights, the call's tensors as specs.

- The block: a deep copy whose parameters are on the meta device (no
  bytes; the worker gives them fresh memory and small random values, as
  weights' values do not shape the compiled code), buffers sent by value
  (they are small and some shape code: masks, frequencies).
- The call: every tensor argument of at most SMALL_TENSOR bytes by value,
  larger ones as (shape, stride, dtype, device, requires_grad) filled with
  random values in the worker; everything else as it is.
- The settings the compiled code depends on: training mode (kept by the
  copy), grad mode, autocast, the default dtype, every keyed compile config
  (adaptor.config_snapshot: custom passes by reference to their class) and
  the process-global flags (adaptor.global_flags: matmul precision,
  deterministic algorithms). A set config that does not pickle makes the
  block NotReproducible.
- The block's classes as the rank has them (class_state: members added or
  replaced at run time, such as transformers' nn.Module.smart_apply).
- The module globals the block's code can read, as the rank has them
  (global_state: `m.SCALE = 0.5`, a registry entry replaced at run time),
  installed in the worker on each attempt.

Functions the block holds that another process cannot import (closures,
lambdas, hooks) go by their code (functions.py). A block the worker
cannot rebuild raises NotReproducible with the reason: a class defined in
`__main__` or inside a function (the worker cannot import it), tensor
subclasses as parameters (DTensor: an FSDP2 block's outside its forward),
or anything in the call or the block that does not pickle. A block with
hooks of its own has its forward compiled alone (entry "forward"): it is
sent without those hooks or fully_shard's state, as its own class (within
its forward a fully_shard-ed block has it: hooked.py). No module's
state-dict hooks are sent: no call runs them. The worker's key
is compared with the rank's (kcache/tools/compile_worker.py): whatever
this copy misses that changes the code changes the key, and the region is
then compiled on the rank as before.
"""

from __future__ import annotations

import copy
import pickle
import types
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from kcache import _torch_adaptor as adaptor

from . import class_state, functions, global_state

SMALL_TENSOR = 1 << 20
_DEVICE_TYPES = ("cpu", "cuda")


class NotReproducible(Exception):
    """The worker could not rebuild this block or call (the reason)."""


@dataclass
class TensorSpec:
    shape: tuple
    stride: tuple
    dtype: torch.dtype
    device: str
    requires_grad: bool

    def make(self) -> torch.Tensor:
        out = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)
        with torch.no_grad():
            if self.dtype.is_floating_point or self.dtype.is_complex:
                out.copy_(torch.randn(self.shape, dtype=self.dtype))
            else:
                out.zero_()
        return out.requires_grad_(self.requires_grad)


@dataclass
class TensorValue:
    value: torch.Tensor
    device: str
    requires_grad: bool

    def make(self) -> torch.Tensor:
        return self.value.to(self.device).requires_grad_(self.requires_grad)


def _unimportable(block: torch.nn.Module) -> str | None:
    for name, module in block.named_modules():
        cls = type(module)
        if cls.__module__ == "__main__" or ("<locals>" in cls.__qualname__ and functions.module_alias(cls) is None):
            where = name or "the block"
            return (f"{where} is of class {cls.__qualname__}, defined in {cls.__module__} "
                    "where another process cannot import it")
    return None


def _tensor_arg(t: torch.Tensor):
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise NotReproducible(f"an argument is a {type(t).__name__}, not a plain tensor")
    if t.numel() * t.element_size() <= SMALL_TENSOR:
        return TensorValue(t.detach().cpu().clone(), str(t.device), t.requires_grad)
    return TensorSpec(tuple(t.shape), tuple(t.stride()), t.dtype, str(t.device),
                      t.requires_grad)


def context() -> dict[str, Any]:
    """This thread's grad mode, autocast, default dtype, compile configs and
    global flags (what `applied` sets again in the worker); NotReproducible
    where a set config does not pickle."""
    autocast = {}
    for dt in _DEVICE_TYPES:
        try:
            autocast[dt] = (torch.is_autocast_enabled(dt), torch.get_autocast_dtype(dt))
        except (RuntimeError, TypeError):
            continue
    try:
        configs = adaptor.config_snapshot()
    except adaptor.NotCarried as e:
        raise NotReproducible(str(e)) from None
    return {"grad": torch.is_grad_enabled(), "autocast": autocast,
            "default_dtype": torch.get_default_dtype(), "configs": configs,
            "flags": adaptor.global_flags.read()}


# Hooks no call of a module runs: left out of every module's copy (fully_shard's
# hold its parameter groups, which do not pickle).
_STATE_DICT_HOOKS = ("_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
                     "_load_state_dict_post_hooks")


def _left_out(block: torch.nn.Module, entry: str, memo: dict) -> None:
    """Empty in the copy (through deepcopy's memo) what the compiled function
    never runs or reads: every module's state-dict hooks and, for a block
    whose forward alone is compiled (entry "forward": a block with hooks of
    its own, kcache/precompiled/hooked.py), the block's own hooks and the
    state composable APIs keep in it (fully_shard's: its process group, its
    hooks' targets)."""
    for m in block.modules():
        for name in _STATE_DICT_HOOKS:
            hooks = m.__dict__.get(name)
            if hooks:
                memo[id(hooks)] = type(hooks)()
    if entry == "forward":
        for name, value in block.__dict__.items():
            if isinstance(value, dict) and (name.endswith("hooks") or "_hooks_" in name
                                            or name.startswith("__composable_api")):
                memo[id(value)] = type(value)()


def _own_forwards(skeleton: torch.nn.Module) -> dict[str, tuple[Any, bool]]:
    """Takes the instance `forward`s (`m.forward = MethodType(f, m)`) out of
    the copy: {path: (f, bound)}, set again by rebuild. Pickled in place, a
    bound method would unpickle as the class's forward (pickle asks the
    half-built module for its `forward`), and the worker would compile the
    class's code under the block's key."""
    out = {}
    for path, m in skeleton.named_modules():
        own = m.__dict__.pop("forward", None)
        if own is not None:
            bound = isinstance(own, types.MethodType) and own.__self__ is m
            out[path] = (own.__func__ if bound else own, bound)
    return out


def describe(block: torch.nn.Module, args: tuple, kwargs: dict, entry: str = "call") -> bytes:
    """The worker's copy of one block call for the region's `entry`
    (kcache.precompiled.entries), pickled; NotReproducible when there is
    none."""
    why = _unimportable(block)
    if why:
        raise NotReproducible(why)
    memo: dict[int, Any] = {}
    devices = set()
    for p in block.parameters():
        if type(p.data) is not torch.Tensor:
            raise NotReproducible(f"a parameter is a {type(p.data).__name__} (a sharded or "
                                  "subclassed tensor), which the worker cannot rebuild")
        devices.add(str(p.device))
        memo[id(p)] = torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
    buffers = {}
    for name, b in block.named_buffers():
        devices.add(str(b.device))
        buffers[name] = b.detach().cpu().clone()
        memo[id(b)] = torch.empty_like(b, device="meta")
    if len(devices) > 1:
        raise NotReproducible(f"the block's tensors are on several devices ({sorted(devices)})")
    try:
        _left_out(block, entry, memo)
        skeleton = copy.deepcopy(block, memo)
        for m in skeleton.modules():  # compiled in place: kcache's own call, not the block's
            if m.__dict__.get("_compiled_call_impl") is not None:
                m._compiled_call_impl = None
        forwards = _own_forwards(skeleton)
        call = pytree.tree_map_only(torch.Tensor, _tensor_arg, (args, kwargs))
        payload = {"block": skeleton, "device": devices.pop() if devices else "cpu",
                   "buffers": buffers, "call": call, "context": context(),
                   "classes": class_state.capture(block), "globals": global_state.capture(block),
                   "forwards": forwards}
        return functions.dumps(payload)
    except NotReproducible:
        raise
    except Exception as e:  # noqa: BLE001 - whatever does not copy or pickle
        raise NotReproducible(f"the block or its call does not copy to another process "
                              f"({type(e).__name__}: {e})") from None


def rebuild(data: bytes) -> tuple[torch.nn.Module, tuple, dict, dict]:
    """(block, args, kwargs, context) in the worker."""
    payload = pickle.loads(data)
    block = payload["block"].to_empty(device=payload["device"])
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in block.parameters():
            if p.dtype.is_floating_point:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype).mul_(0.02))
            else:
                p.zero_()
        named = dict(block.named_buffers())
        for name, value in payload["buffers"].items():
            named[name].copy_(value)
    for path, (fn, bound) in payload.get("forwards", {}).items():
        m = block.get_submodule(path)
        m.forward = types.MethodType(fn, m) if bound else fn
    args, kwargs = pytree.tree_map_only((TensorSpec, TensorValue), lambda s: s.make(), payload["call"])
    context = dict(payload["context"], globals=payload.get("globals", {}))
    context["classes_differ"] = class_state.apply(block, payload["classes"])
    return block, args, kwargs, context


class applied:
    """The rank's grad mode, autocast, default dtype, configs, global flags
    and module globals, here (the configs and module globals stay: the next
    job installs its own)."""

    def __init__(self, context: dict) -> None:
        self.context = context
        self.stack: list = []
        self.installed: list[str] = []

    def __enter__(self) -> list[str]:
        c = self.context
        self.installed = global_state.apply(c.get("globals", {}))
        failed = adaptor.config_restore(c["configs"])
        self.saved_flags = adaptor.global_flags.apply(c.get("flags", {}))
        self.saved_dtype = torch.get_default_dtype()
        torch.set_default_dtype(c["default_dtype"])
        self.stack = [torch.set_grad_enabled(c["grad"])]
        for dt, (on, dtype) in c["autocast"].items():
            if on:
                self.stack.append(torch.autocast(dt, dtype=dtype))
        for cm in self.stack:
            cm.__enter__()
        return failed

    def __exit__(self, *exc) -> None:
        for cm in reversed(self.stack):
            cm.__exit__(*exc)
        torch.set_default_dtype(self.saved_dtype)
        adaptor.global_flags.apply(self.saved_flags)
