"""kcache: a persistent, cluster-wide cache for torch.compile's regional kernels.

    import kcache
    model = kcache.compile_regions(model, mode="default")   # drop-in for accelerate's

`import kcache` is cheap: it never imports torch. The compile integration
(compile_regions, compile, find_regions) loads torch on first use.

The package by role, in the order a region travels (docs/architecture.md,
"The Python package"): api (the calls a job makes) -> precompiled or
traced (the two paths) -> guards, artifacts, compat -> keys -> state,
settings -> _torch_adaptor (the one place PyTorch's internals are used).
aoti holds AOTInductor regions; tools the prewarm commands.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "compile_regions": "kcache.api",
    "compile_regions_in_place": "kcache.api",
    "compile": "kcache.api",
    "configure": "kcache.api",
    "stats": "kcache.api",
    "find_regions": "kcache.api",
    "region_report": "kcache.api",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kcache' has no attribute {name!r}")
    return getattr(import_module(module), name)
