"""Which path a block takes, and the compiled module for it.

Compiler holds one job's torch.compile arguments: with the Inductor backend
each region goes through kcache (a PrecompiledRegion by default, the traced
path's RegionBackend otherwise); any other backend, kcache disabled or a
torch kcache cannot work with leaves torch.compile unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from kcache import _core, background, settings
from kcache import _torch_adaptor as adaptor
from kcache.compat import state_dict_keys
from kcache.keys.fields import CompileSettings
from kcache.precompiled import PrecompiledRegion
from kcache.state import store
from kcache.traced.backend import RegionBackend

log = logging.getLogger("kcache")

_SETTINGS_ARGS = ("backend", "mode", "options", "fullgraph", "dynamic")


def _support_path() -> str:
    """What kcache does on this torch (adaptor.support, decided once)."""
    return adaptor.support(settings.enabled("KCACHE_ALLOW_UNTESTED_TORCH")).path


def compile_settings(kwargs: dict[str, Any]) -> CompileSettings | None:
    """What torch.compile was asked for, or None when kcache stays out."""
    if kwargs.get("backend", "inductor") != "inductor" or settings.enabled("KCACHE_DISABLE"):
        return None
    if _support_path() == "stock":
        return None  # a torch kcache cannot work with: torch.compile unchanged
    return CompileSettings(backend="inductor", mode=kwargs.get("mode"),
                           fullgraph=bool(kwargs.get("fullgraph", False)),
                           dynamic=kwargs.get("dynamic"), options=dict(kwargs.get("options") or {}))


class Compiler:
    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs
        self.settings = compile_settings(kwargs)
        self.backends: dict[str, RegionBackend] = {}
        self.regions: dict[str, PrecompiledRegion] = {}

    def backend(self, region_name: str) -> RegionBackend | None:
        """The traced path's backend for a region, or None when kcache is off."""
        if self.settings is None:
            return None
        backend = self.backends.get(region_name)
        if backend is None:
            try:
                client = store.get_store()
            except _core.KcacheError as e:
                # A bad KCACHE_* setting must not stop the job: compile as
                # stock PyTorch would, and say why once.
                log.error("kcache disabled: %s", e)
                self.settings = None
                return None
            backend = self.backends[region_name] = RegionBackend(region_name, self.settings, client)
        return backend

    def traced(self, module: torch.nn.Module, region_name: str) -> torch.nn.Module:
        """torch.compile(module) with kcache's backend (or unchanged)."""
        backend = self.backend(region_name)
        if backend is None:
            return torch.compile(module, **self.kwargs)
        extra = {k: v for k, v in self.kwargs.items() if k not in _SETTINGS_ARGS}
        return state_dict_keys.plain_keys(torch.compile(module, backend=backend, fullgraph=self.settings.fullgraph,
                                                        dynamic=self.settings.dynamic, **extra))

    def traced_in_place(self, module: torch.nn.Module, region_name: str) -> None:
        """module.compile() with kcache's backend (or unchanged)."""
        backend = self.backend(region_name)
        if backend is None:
            module.compile(**self.kwargs)
            return
        module.compile(backend=backend, fullgraph=self.settings.fullgraph, dynamic=self.settings.dynamic)

    def traced_call_impl(self, module: torch.nn.Module, region_name: str):
        """What traced_in_place would set as `module._compiled_call_impl`."""
        return torch.compile(module._call_impl, backend=self.backend(region_name),
                             fullgraph=self.settings.fullgraph, dynamic=self.settings.dynamic)

    def precompiled(self, name: str, traced, entry: str = "call") -> PrecompiledRegion | None:
        """The region `name` on the precompiled path, or None when it is off
        (KCACHE_PRECOMPILED=0, another backend, kcache disabled, a torch
        whose precompiled facts do not hold)."""
        if not settings.enabled("KCACHE_PRECOMPILED") or _support_path() != "precompiled" or \
                self.backend(name) is None:
            return None
        region = self.regions.get(name)
        if region is None:
            client = store.get_store()
            region = self.regions[name] = PrecompiledRegion(name, self.settings, client, traced=traced,
                                                            entry=entry, background=background.for_store(client))
        return region
