"""The key of a precompiled region, found without tracing.

A warm process must know which artifact to fetch before Dynamo would have
traced anything, so the key is derived from what determines the graph
(docs/keys.md, "Precompiled regions"):

- the block: its class and every submodule's class (module and qualname),
  the sha256 of each source file that defines one of them, the version of
  each top-level package they come from, every parameter's and buffer's
  name, shape, dtype and requires_grad, every submodule's training flag;
- the call: each argument's kind — tensors by dtype, device type, shape
  (rank only under dynamic=True), stride and requires_grad; plain values
  (None, bool, int, float, str) by value; containers element by element;
  any other object by its class;
- the process: grad mode and autocast state (dtype field), torch version,
  host compiler, target, compile settings, the relevant environment
  (keyfields.all_fields, shared with the traced path).

Functions Dynamo inlines from other files are checked after loading
against their recorded checksums (kcache._torch_adaptor.changed_sources),
and every guard PyTorch keeps on this path is still checked on each call.
Per-block constants the guards pin (transformers' layer_idx when a KV
cache is passed) choose a *variant* of the region: variant_fields().
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys
from functools import lru_cache
from typing import Any

import torch

from kcache import _torch_adaptor as adaptor
from kcache.keys import fields as keyfields
from kcache.keys.fields import CompileSettings
from kcache.keys.graph_key import dtype_label

# v2: every variant carries its portable guard checks (docs/precompiled.md "Guards").
SCHEMA = "kcache-precompiled-v2"


def canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=repr)


@lru_cache(maxsize=None)
def _file_sha256(path: str) -> str:
    try:
        return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:32]
    except OSError:
        return "unreadable"


def _module_identity(module_name: str) -> tuple[str, str | None]:
    """(source sha256, version of its top-level package) of a Python module."""
    mod = sys.modules.get(module_name)
    source = _file_sha256(getattr(mod, "__file__", None) or "") if mod else "missing"
    top = sys.modules.get(module_name.split(".")[0])
    return source, getattr(top, "__version__", None)


def block_description(block: torch.nn.Module) -> dict[str, Any]:
    """Everything about a block that shapes its graph, except values that the
    guards pin per block (layer indices): those choose the variant."""
    modules, sources, packages = [], {}, {}
    for path, m in block.named_modules():
        cls = type(m)
        modules.append([path, f"{cls.__module__}.{cls.__qualname__}", m.training])
        for klass in cls.__mro__:
            if klass.__module__ in ("builtins", "torch.nn.modules.module"):
                continue
            src, version = _module_identity(klass.__module__)
            sources[klass.__module__] = src
            if version is not None:
                packages[klass.__module__.split(".")[0]] = version
    tensors = [[name, list(t.shape), str(t.dtype).removeprefix("torch."), list(t.stride())]
               for name, t in list(block.named_parameters()) + list(block.named_buffers())]
    desc = {"modules": modules, "sources": sources, "packages": packages, "tensors": tensors}
    forwards = instance_forwards(block)
    if forwards:  # only then: blocks without one keep the keys they had
        desc["forwards"] = {path: _function_identity(fn) for path, fn in forwards.items()}
    return desc


def _function_identity(fn: Any) -> str:
    code = getattr(fn, "__code__", None)
    name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    return f"{name}:{adaptor.code_digest(code)}" if code is not None else f"{name}:{type(fn).__qualname__}"


def instance_forwards(block: torch.nn.Module) -> dict[str, Any]:
    """{module path: function} of the modules whose instance has a `forward`
    of its own (`m.forward = MethodType(f, m)`): the code that runs is f,
    not the class's forward."""
    out = {}
    for path, m in block.named_modules():
        own = m.__dict__.get("forward")
        if own is not None:
            out[path] = getattr(own, "__func__", own)
    return out


def _spec(value: Any, dynamic: bool | None) -> Any:
    if isinstance(value, torch.Tensor):
        shape = ["dyn", value.dim()] if dynamic else list(value.shape)
        stride = ["dyn", value.dim()] if dynamic else list(value.stride())
        return ["T", str(value.dtype).removeprefix("torch."), value.device.type, shape, stride,
                value.requires_grad]
    if value is None or isinstance(value, bool | int | float | str):
        return ["V", repr(value)]
    if isinstance(value, list | tuple):
        return ["L" if isinstance(value, list) else "U", [_spec(v, dynamic) for v in value]]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return ["D", {k: _spec(v, dynamic) for k, v in sorted(value.items())}]
    return ["O", f"{type(value).__module__}.{type(value).__qualname__}"]


def call_description(args: tuple, kwargs: dict, dynamic: bool | None) -> dict[str, Any]:
    return {"args": [_spec(a, dynamic) for a in args],
            "kwargs": {k: _spec(v, dynamic) for k, v in sorted(kwargs.items())},
            "grad_enabled": torch.is_grad_enabled()}


def is_training(block: torch.nn.Module, args: tuple, kwargs: dict) -> bool:
    if not torch.is_grad_enabled():
        return False
    tensors = [t for t in list(args) + list(kwargs.values()) if isinstance(t, torch.Tensor)]
    return any(p.requires_grad for p in block.parameters()) or any(t.requires_grad for t in tensors)


def device_of(block: torch.nn.Module, args: tuple) -> str:
    for t in list(block.parameters()) + [a for a in args if isinstance(a, torch.Tensor)]:
        return t.device.type
    return "cpu"


def region_fields(block: torch.nn.Module, args: tuple, kwargs: dict,
                  settings: CompileSettings, *, block_desc: dict | None = None,
                  entry: str = "call", entry_source: str | None = None) -> dict[str, str]:
    """Every key field of the region, the "region" field without a trace.

    `entry` names the function compiled for every block (kcache.precompiled:
    "call" for compile_regions, "call_impl" for blocks compiled in place);
    the default adds nothing, so compile_regions' keys stay as they were.
    `entry_source` identifies that function's code where Dynamo's inlined-
    source check reads it (kcache.precompiled.entries.source_digest): a
    stored function whose entry has since moved or changed would fail that
    check on every load, so it gets another key instead."""
    fields = {"schema": SCHEMA, "block": block_desc or block_description(block),
              "call": call_description(args, kwargs, settings.dynamic)}
    if entry != "call":
        fields["entry"] = entry
    if entry_source is not None:
        fields["entry_source"] = entry_source
    region = canon(fields)
    return keyfields.all_fields(region, settings, is_training(block, args, kwargs),
                                device_of(block, args))


def variant_fields(fields: dict[str, str], constants: dict[str, Any],
                   requires_grad: list[bool]) -> dict[str, str]:
    """The fields of one variant: the region's, plus the values of the
    per-block constants the guards pin and which parameters train."""
    out = dict(fields)
    out["region"] = canon({"region": fields["region"], "constants": constants,
                            "requires_grad": requires_grad})
    return out


def label_of(region_name: str, block: torch.nn.Module, args: tuple, kwargs: dict,
             settings: CompileSettings) -> str:
    device = device_of(block, args)
    return keyfields.label(region_name, settings, is_training(block, args, kwargs), device,
                           dtype_label(list(block.parameters()))) + "/precompiled"
