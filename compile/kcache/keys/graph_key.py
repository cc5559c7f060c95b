"""The key of one region: its fingerprint plus the job's fields, hashed by the C++ core."""

from __future__ import annotations

from typing import Any

import torch

from kcache.keys import fields as keyfields
from kcache import _torch_adaptor as adaptor
from kcache.keys.fingerprint import fingerprint_graph
from kcache.keys.fields import CompileSettings
from kcache.keys.make import key_of


def device_type(example_inputs: list[Any]) -> str:
    for t in example_inputs:
        if isinstance(t, torch.Tensor):
            return t.device.type
    return "cpu"


def dtype_label(example_inputs: list[Any]) -> str:
    for t in example_inputs:
        if isinstance(t, torch.nn.Parameter):
            return {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}.get(
                t.dtype, str(t.dtype).removeprefix("torch."))
    return "mixed"


def is_training(example_inputs: list[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


def region_key(gm, example_inputs: list[Any], region_name: str, settings: CompileSettings,
               *, target: str | None = None, toolchain: str | None = None,
               env: str | None = None) -> tuple[str, str]:
    """(64-hex key, explanation JSON) of a Dynamo graph compiled with `settings`."""
    fp = fingerprint_graph(gm, example_inputs)
    training = is_training(example_inputs)
    device = device_type(example_inputs)
    fields = keyfields.all_fields(fp.canonical, settings, training, device,
                                  target=target, toolchain=toolchain, env=env)
    label = keyfields.label(region_name, settings, training, device, dtype_label(example_inputs))
    return key_of(fields, label, {"region": fp.summary()})


def key_of_module(module: torch.nn.Module, *args: Any, settings: CompileSettings | None = None,
                  region_name: str | None = None, target: str | None = None,
                  toolchain: str | None = None, env: str | None = None,
                  **kwargs: Any) -> list[tuple[str, str]]:
    """Keys of the graphs Dynamo captures when `module(*args, **kwargs)` runs.

    Runs the module once under torch.compile with a recording backend (no
    Inductor). Resets Dynamo first so that a fresh trace happens: meant for
    tools, tests and benchmarks, not for the middle of a training job.
    """
    settings = settings or CompileSettings()
    name = region_name or type(module).__name__
    keys: list[tuple[str, str]] = []

    def backend(gm, example_inputs):
        keys.append(region_key(gm, example_inputs, name, settings, target=target,
                               toolchain=toolchain, env=env))
        return gm.forward

    adaptor.reset_dynamo()
    torch.compile(module, backend=backend, fullgraph=settings.fullgraph,
                  dynamic=settings.dynamic)(*args, **kwargs)
    return keys
