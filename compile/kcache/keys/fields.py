"""The key's fields other than the region: dtype, target, mode, toolchain, env.

Each is canonical text (sorted JSON or a short string) so the same setup on
two ranks gives identical bytes; keys/cache_key.hpp hashes them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from typing import Any

import torch

from kcache import _torch_adaptor as adaptor
from kcache import settings
from kcache.keys import host_facts
from kcache.keys.env_table import env_field

ARTIFACT_SCHEMA = "kcache-bundle-v1"


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=repr)


@dataclass(frozen=True)
class CompileSettings:
    """What the job asked torch.compile for."""

    backend: str = "inductor"
    mode: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def short_mode(self) -> str:
        return self.mode or "default"


def dtype_field() -> str:
    autocast = {}
    for dev in ("cpu", "cuda"):
        try:
            if torch.is_autocast_enabled(dev):
                autocast[dev] = str(torch.get_autocast_dtype(dev)).removeprefix("torch.")
        except (RuntimeError, TypeError):
            pass
    return _canon({"default": str(torch.get_default_dtype()).removeprefix("torch."),
                   "autocast": autocast})


@functools.lru_cache(maxsize=None)
def _compiler_identity(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0].strip() if out.stdout else cxx
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def compiler_identity() -> str:
    # The identity is what the compiler says it is, never its path.
    return _compiler_identity(adaptor.host_compiler())


@functools.lru_cache(maxsize=None)
def _native_target_flags(cxx: str) -> str:
    """What -march=native resolves to here, as the compiler reports it.

    Inductor compiles CPU kernels with -march=native, so two hosts with one
    vector ISA but different enabled extensions get different binaries.
    Asked once per node (kcache.keys.host_facts): the answer depends only on the
    compiler binary and the CPU's flags.
    """
    return host_facts.cached("march-native", native_target_inputs(cxx), lambda: _query_native_target_flags(cxx),
                             keep=lambda value: value != "unknown")


def native_target_inputs(cxx: str | None = None) -> dict:
    """What the -march=native answer depends on (the node's record's inputs)."""
    cxx = cxx or adaptor.host_compiler()
    return {"cxx": host_facts.compiler_stamp(cxx), "cpu_flags": host_facts.cpu_flags()}


def _query_native_target_flags(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "-march=native", "-Q", "--help=target"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = sorted(line.split() for line in out.stdout.splitlines()
                   if line.strip().startswith(("-m", "-march", "-mtune")))
    return hashlib.sha256(repr(lines).encode()).hexdigest()[:16]


def native_target_flags() -> str:
    return _native_target_flags(adaptor.host_compiler())


def _fixed_target(device_type: str) -> str | None:
    """KCACHE_TARGET, or the GPU arch (never the device index).

    Device 0's arch: kcache caches only regions on cuda:0 (docs/keys.md,
    "Device indices"), and the C++ client asks the CUDA driver for the same
    device (kcache._core.cuda_target(); tests/python/compile/test_cuda_target.py
    shows the two agree).
    """
    # Trimmed like the C++ side (client/cuda_target.cpp): " cuda:sm_90 " is cuda:sm_90.
    override = settings.get("KCACHE_TARGET")
    if override:
        return override
    if device_type == "cuda":
        major, minor = torch.cuda.get_device_capability(0)
        return f"cuda:sm_{major}{minor}"
    return None


def target_field(device_type: str = "cpu") -> str:
    return _fixed_target(device_type) or _canon({
        "device": "cpu", "isa": adaptor.cpu_vec_isa(), "march_native": native_target_flags(),
        "threads": torch.get_num_threads()})


def short_target(device_type: str = "cpu") -> str:
    return _fixed_target(device_type) or f"cpu:{adaptor.cpu_vec_isa().split()[0]}"


def mode_field(settings: CompileSettings, training: bool) -> str:
    return _canon({
        "backend": settings.backend,
        "mode": settings.short_mode(),
        "fullgraph": settings.fullgraph,
        "dynamic": settings.dynamic,
        "options": settings.options,
        "phase": "train" if training else "infer",
        "configs": adaptor.config_fingerprint(),
    })


def toolchain_field() -> str:
    triton = None
    try:
        import triton  # type: ignore

        triton = triton.__version__
    except ImportError:
        pass
    return _canon({
        "artifact": ARTIFACT_SCHEMA,
        "torch": torch.__version__,
        "torch_git": torch.version.git_version,
        "triton": triton,
        "cxx": compiler_identity(),
        "cuda": torch.version.cuda,
    })


def all_fields(region: str, settings: CompileSettings, training: bool,
               device_type: str = "cpu", *, target: str | None = None,
               toolchain: str | None = None, env: str | None = None) -> dict[str, str]:
    """Every key field. `target`, `toolchain`, `env` override detection
    (golden keys; prewarming for another host)."""
    return {
        "region": region,
        "dtype": dtype_field(),
        "target": target or target_field(device_type),
        "mode": mode_field(settings, training),
        "toolchain": toolchain or toolchain_field(),
        "env": env if env is not None else env_field(),
    }


def label(region_name: str, settings: CompileSettings, training: bool,
          device_type: str = "cpu", dtype: str = "") -> str:
    parts = [region_name, short_target(device_type), dtype or "mixed",
             settings.short_mode(), "train" if training else "infer"]
    return "/".join(p.replace(" ", "_") for p in parts)
