"""kcache.compile_regions and kcache.compile: the one call a training job makes.

compile_regions is a drop-in for accelerate.utils.compile_regions: the same
region rule, the same return conventions (a new module sharing the original's
parameters, with `_orig_mod` pointing at the original) and the same
torch.compile keyword arguments. With the Inductor backend each region is
compiled through kcache (backend.RegionBackend); any other backend has
nothing to cache and is passed through to torch.compile unchanged.
"""

from __future__ import annotations

import logging
import os
from functools import partial
from types import MethodType
from typing import Any

import torch

from . import _torch_adaptor as adaptor
from . import counters as _stats
from .backend import RegionBackend
from . import precompiled_in_place, state_dict_keys
from .precompiled import PrecompiledBlock, PrecompiledRegion
from .keyfields import CompileSettings
from . import _core
from .regions import find_regions, has_repeated_blocks, is_repeated_blocks

log = logging.getLogger("kcache")

_store = None


def configure(url: str | None = None, local_dir: str | None = None, **client_options: Any) -> None:
    """Configures the cache client in code.

    With only `url` and/or `local_dir`, every other KCACHE_* setting (token,
    TLS files, trusted and signing keys, target, timeouts …) still applies:
    the two arguments override KCACHE_URL / KCACHE_LOCAL_DIR ("none" turns
    the node tier off). With any other option the client is built from the
    arguments alone (url and local_dir falling back to KCACHE_URL and
    KCACHE_LOCAL_DIR). Without a URL (and without KCACHE_URL) regions are
    cached on this node only. Options are those of kcache._core.Client
    (docs/client.md).
    """
    global _store
    if not client_options:
        overrides = {"KCACHE_URL": url, "KCACHE_LOCAL_DIR": local_dir}
        saved = {k: os.environ.get(k) for k in overrides}
        try:
            for k, v in overrides.items():
                if v is not None:
                    os.environ[k] = v
            _store = _core.Client.from_env()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return
    env = _core.Client.from_env().config
    _store = _core.Client(url=url if url is not None else (env.get("url") or None),
                          local_dir=local_dir or env.get("local_dir"), **client_options)


def _get_store():
    if _store is None:
        configure()
    return _store


def stats() -> dict:
    """This process's kcache counters (hits by tier, misses, compiles, seconds
    saved), with the cache client's own under "client"."""
    out = _stats.get().as_dict()
    if _store is not None:
        out["client"] = _store.stats()
    return out


def last_keys() -> list[str]:
    """The keys of the regions this process compiled or restored, in order."""
    from .backend import _keys_seen

    return list(_keys_seen)


def region_outcomes() -> list[dict[str, str]]:
    """Each region this process keyed, in order: key, label, where its
    artifact came from ("node", "server", "compiled", "local", "error") and
    the path it took ("precompiled", or "traced", with the reason when a
    region that compile_regions would precompile could not be)."""
    from .backend import _outcomes

    return [{"key": k, **v} for k, v in _outcomes.items()]


def _settings(kwargs: dict[str, Any]) -> CompileSettings | None:
    backend = kwargs.get("backend", "inductor")
    if backend != "inductor" or os.environ.get("KCACHE_DISABLE") == "1":
        return None
    if adaptor.support().path == "stock":
        return None  # a torch kcache cannot work with: torch.compile unchanged
    return CompileSettings(backend="inductor", mode=kwargs.get("mode"),
                           fullgraph=bool(kwargs.get("fullgraph", False)),
                           dynamic=kwargs.get("dynamic"), options=dict(kwargs.get("options") or {}))


class _Compiler:
    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs
        self.settings = _settings(kwargs)
        self.backends: dict[str, RegionBackend] = {}

    def _backend(self, region_name: str) -> RegionBackend | None:
        backend = self.backends.get(region_name)
        if backend is None:
            try:
                store = _get_store()
            except _core.KcacheError as e:
                # A bad KCACHE_* setting must not stop the job: compile as
                # stock PyTorch would, and say why once.
                log.error("kcache disabled: %s", e)
                self.settings = None
                return None
            backend = self.backends[region_name] = RegionBackend(region_name, self.settings, store)
        return backend

    def __call__(self, module: torch.nn.Module, region_name: str) -> torch.nn.Module:
        backend = self._backend(region_name) if self.settings is not None else None
        if backend is None:
            return torch.compile(module, **self.kwargs)
        extra = {k: v for k, v in self.kwargs.items()
                 if k not in ("backend", "mode", "options", "fullgraph", "dynamic")}
        return state_dict_keys.plain_keys(torch.compile(module, backend=backend, fullgraph=self.settings.fullgraph,
                                                        dynamic=self.settings.dynamic, **extra))

    def compile_in_place(self, module: torch.nn.Module, region_name: str) -> None:
        backend = self._backend(region_name) if self.settings is not None else None
        if backend is None:
            module.compile(**self.kwargs)
            return
        module.compile(backend=backend, fullgraph=self.settings.fullgraph, dynamic=self.settings.dynamic)

    def traced_call_impl(self, module: torch.nn.Module, region_name: str):
        """What compile_in_place would set as `module._compiled_call_impl`."""
        return torch.compile(module._call_impl, backend=self._backend(region_name),
                             fullgraph=self.settings.fullgraph, dynamic=self.settings.dynamic)

    def precompiled_region(self, regions: dict[str, PrecompiledRegion], name: str,
                           traced, entry: str = "call") -> PrecompiledRegion | None:
        """The region `name` on the precompiled path, or None when it is off
        (KCACHE_PRECOMPILED=0, another backend, kcache disabled, a torch
        whose precompiled facts do not hold)."""
        if not precompiled_enabled() or adaptor.support().path != "precompiled" or \
                self.settings is None or self._backend(name) is None:
            return None
        region = regions.get(name)
        if region is None:
            region = regions[name] = PrecompiledRegion(name, self.settings, _get_store(),
                                                       traced=traced, entry=entry)
        return region


def _rebind_instance_methods(new: torch.nn.Module, old: torch.nn.Module) -> None:
    """Points instance-level bound methods and partials copied from `old`
    at `new`, as Accelerate's compile_regions does (its
    _rebind_module_methods).

    Accelerate's mixed precision replaces `model.forward` with a method bound
    to the model (autocast around the class's forward), and its hooks
    install a partial `forward` and a bound `_old_forward`. Copying __dict__
    would keep them bound to the *original* model, whose blocks are not
    compiled, so the job would silently run uncompiled (accelerate#4188,
    #4253). Rebinding makes the wrapper call the compiled twin.
    """
    def rebind(value: Any) -> Any:
        if isinstance(value, MethodType) and value.__self__ is old:
            return MethodType(value.__func__, new)
        if isinstance(value, partial):
            args = tuple(new if a is old else a for a in value.args)
            kwargs = {k: new if a is old else a for k, a in value.keywords.items()}
            rebound = partial(rebind(value.func), *args, **kwargs)
            rebound.__dict__.update(value.__dict__)
            if hasattr(value, "__wrapped__"):
                rebound.__wrapped__ = rebind(value.__wrapped__)
            return rebound
        return value

    for name, value in list(new.__dict__.items()):
        new.__dict__[name] = rebind(value)


def precompiled_enabled() -> bool:
    """Precompiled regions are the default; KCACHE_PRECOMPILED=0 (or false,
    no, off) turns them off.

    They were opt-in while issue 32 was open (false hits: a warm process
    could load a region whose Python code, module globals or hooks differed
    from the cold process's). Every guard Dynamo builds is now kept, checked
    portably, or checked by one trace per variant, and the false-hit fuzzer
    found 0 false hits in 3,120 warm runs (docs/precompiled.md "Guards",
    bench/falsehit/REPORT.md)."""
    return os.environ.get("KCACHE_PRECOMPILED", "1").strip().lower() not in ("0", "false", "no", "off")


def compile_regions(module: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
    """Regional compilation through kcache; see accelerate.utils.compile_regions.

    Repeated blocks take the precompiled path (kcache.precompiled: no Dynamo
    trace on a warm start, one trace per region cluster-wide on a cold one)
    unless KCACHE_PRECOMPILED=0; a region that cannot falls back to the
    traced path (Dynamo traces each block, kcache supplies what it
    compiles), said once with the reason."""
    compiler = _Compiler(compile_kwargs)
    regions = find_regions(module)
    names = {id(module.get_submodule(m)): r.name for r in regions for m in r.members}
    adaptor.ensure_recompile_limit(sum(r.count for r in regions))
    precompiled: dict[str, PrecompiledRegion] = {}

    def block(sub: torch.nn.Module) -> torch.nn.Module:
        name = names.get(id(sub), type(sub).__name__)
        region = compiler.precompiled_region(precompiled, name, traced=lambda b, n=name: compiler(b, n))
        return compiler(sub, name) if region is None else PrecompiledBlock(sub, region)

    def walk(m: torch.nn.Module) -> torch.nn.Module:
        if is_repeated_blocks(m):
            new = torch.nn.ModuleList()
            for sub in m:
                new.append(block(sub))
            return new
        if has_repeated_blocks(m):
            new = m.__class__.__new__(m.__class__)
            new.__dict__.update(m.__dict__)
            new._modules = {}
            for name, child in m.named_children():
                new.add_module(name, walk(child))
            _rebind_instance_methods(new, m)
            return new
        return block(m)  # the parts around the blocks: a region of one block each

    new_module = walk(module)
    if "_orig_mod" not in new_module.__dict__:
        new_module.__dict__["_orig_mod"] = module
    return new_module


def compile(model: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
    """The whole model as one region, through the same machinery."""
    return _Compiler(compile_kwargs)(model, type(model).__name__)


def compile_regions_in_place(module: torch.nn.Module, **compile_kwargs: Any) -> None:
    """Like compile_regions, but compiling the blocks themselves, as
    nn.Module.compile() does (Accelerate's DeepSpeed and FSDP2 variants: the
    engine keeps its module objects). Blocks take the precompiled path
    (kcache.precompiled_in_place) unless KCACHE_PRECOMPILED=0 or a block has
    module hooks; those are compiled as nn.Module.compile() would."""
    compiler = _Compiler(compile_kwargs)
    regions = find_regions(module)
    names = {id(module.get_submodule(m)): r.name for r in regions for m in r.members}
    adaptor.ensure_recompile_limit(sum(r.count for r in regions))
    precompiled: dict[str, PrecompiledRegion] = {}

    def block(sub: torch.nn.Module, name: str) -> None:
        region = compiler.precompiled_region(
            precompiled, name, traced=lambda b, n=name: compiler.traced_call_impl(b, n),
            entry="call_impl")
        if region is None:
            compiler.compile_in_place(sub, name)
        else:
            precompiled_in_place.install(sub, region)

    def walk(m: torch.nn.Module) -> None:
        if is_repeated_blocks(m):
            for sub in m:
                block(sub, names.get(id(sub), type(sub).__name__))
        elif has_repeated_blocks(m):
            for child in m.children():
                walk(child)
        else:
            block(m, type(m).__name__)

    walk(module)
