"""The process-global state PyTorch's guards and caches read, classified:
what the key holds, what the compile worker is given, what is left to
PyTorch's own check (docs/keys.md, "Process-global state").

The list is PyTorch's own: the fields Dynamo's GlobalStateGuard records
(its JSON state), plus the per-backend float32 precisions that set some
of them. A field
this module has not classified fails tests/python/compile/test_config_table.py.
"""

from __future__ import annotations

import json

import torch

# Dynamo's GlobalStateGuard field -> (class, reason). "key": kcache keys it
# and the worker compiles under the rank's value; "elsewhere": another key
# field holds it and the worker is given it already; "pytorch": PyTorch's
# global-state check refuses a region compiled under another value.
GUARD_FIELDS: dict[str, tuple[str, str]] = {
    "grad_mode": ("elsewhere", "the region field's grad= line; the worker compiles under the rank's grad mode"),
    "autocast_state": ("elsewhere", "the dtype field; the worker compiles under the rank's autocast"),
    "default_dtype": ("elsewhere", "the dtype field; the worker compiles under the rank's default dtype"),
    "num_threads": ("elsewhere", "the target field (threads); the worker's key holds its own"),
    "allow_tf32": ("key", "cuBLAS TF32: keyed and set in the worker as the backends' fp32_precision "
                          "(what torch.set_float32_matmul_precision sets)"),
    "cuda_matmul_precision": ("key", "torch.backends.cuda.matmul.fp32_precision, keyed and set in the worker "
                                     "(torch 2.15)"),
    "allow_fp16_reduce": ("key", "cuBLAS reduced-precision reductions"),
    "allow_bf16_reduce": ("key", "cuBLAS reduced-precision reductions"),
    "deterministic_algorithms": ("key", "Inductor generates deterministic code under it"),
    "deterministic_algorithms_warn_only": ("key", "deterministic algorithms' warn-only mode"),
    "torch_function": ("pytorch", "__torch_function__ enabled; PyTorch's global-state check refuses a region "
                                   "loaded under the other value"),
    "torch_function_all_disabled": ("pytorch", "__torch_function__ disabled altogether; PyTorch's global-state "
                                               "check refuses a region loaded under the other value"),
}


def guard_fields() -> list[str]:
    """The fields this torch's GlobalStateGuard records."""
    from torch._C._dynamo.guards import GlobalStateGuard

    return sorted(json.loads(GlobalStateGuard().__getstate__()))


# The float32 precision settings (torch.backends.<backend>.fp32_precision):
# what torch.set_float32_matmul_precision sets ("high": cuda.matmul and
# mkldnn.matmul "tf32"), read and set through the per-backend API, which
# every supported release has (reading the legacy getter raises in 2.15
# once a job mixed the two APIs).
_FP32 = ("", "cuda.matmul", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn", "cudnn.conv", "cudnn.rnn")


def _backend(path: str):
    obj = torch.backends
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part, None)
    return obj if obj is not None and hasattr(obj, "fp32_precision") else None


def _reduce(kind: str) -> int:
    """cuBLAS reduced-precision reduction flag as PyTorch's guard reads it."""
    flag = getattr(torch.backends.cuda.matmul, f"allow_{kind}_reduced_precision_reduction")
    return int(flag) if isinstance(flag, bool) else int(bool(flag))


def read() -> dict[str, object]:
    """The keyed flags' values now (what `apply` sets again)."""
    out: dict[str, object] = {}
    for path in _FP32:
        backend = _backend(path)
        if backend is not None:
            out[f"fp32_precision:{path or 'backends'}"] = backend.fp32_precision
    out.update({
        "allow_fp16_reduce": _reduce("fp16"),
        "allow_bf16_reduce": _reduce("bf16"),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_algorithms_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
    })
    return out


# What a fresh process has: a flag at its default adds nothing to the key,
# so keys made before these flags were keyed stay the same.
DEFAULTS: dict[str, object] = {
    **{f"fp32_precision:{path or 'backends'}": "none" for path in _FP32},
    "fp32_precision:cudnn.conv": "tf32", "fp32_precision:cudnn.rnn": "tf32",
    "allow_fp16_reduce": 1, "allow_bf16_reduce": 1,
    "deterministic_algorithms": False, "deterministic_algorithms_warn_only": False,
}


def key_part() -> list[tuple[str, str]]:
    """The flags that differ from a fresh process's, as (name, value text)."""
    return sorted((k, repr(v)) for k, v in read().items() if v != DEFAULTS.get(k))


def apply(flags: dict[str, object]) -> dict[str, object]:
    """Sets the rank's flags here; what was here before (to set back)."""
    before = read()
    for path in _FP32:  # the generic one first: "none" below it inherits from it
        name = f"fp32_precision:{path or 'backends'}"
        backend = _backend(path)
        if name in flags and backend is not None and flags[name] != before.get(name):
            backend.fp32_precision = flags[name]
    for kind in ("fp16", "bf16"):
        name = f"allow_{kind}_reduce"
        if name in flags and flags[name] != before[name]:
            setattr(torch.backends.cuda.matmul, f"allow_{kind}_reduced_precision_reduction", bool(flags[name]))
    if "deterministic_algorithms" in flags:
        torch.use_deterministic_algorithms(bool(flags["deterministic_algorithms"]),
                                           warn_only=bool(flags.get("deterministic_algorithms_warn_only")))
    return before
