"""RegionBackend: a torch.compile backend that wraps Inductor with kcache.

Dynamo traces the region once and hands its graph here. The key is computed
from that graph (nothing is traced twice); on a hit the stored bundle is
restored into PyTorch's caches and Inductor then compiles from cache (no
code generation, no host compiler); on a miss Inductor compiles inside a
capture and the result is stored. A cache that is wrong or unreachable costs
at most the compile the job would have done anyway.

In background mode (kcache.background) a graph whose region is not stored
is compiled by the rank's compile worker while it runs eagerly
(offthread.py); the backend's switch() fetches the region once stored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

import torch

from kcache import _core, background
from kcache import _torch_adaptor as adaptor
from kcache.artifacts import binary_misses, bundle_io, isa_probes, verify_first_use
from kcache.keys.fields import CompileSettings, short_target
from kcache.keys.graph_key import device_type as _device_type
from kcache.keys.graph_key import region_key
from kcache.state import counters
from kcache.state import outcomes

from . import offthread

log = logging.getLogger("kcache")

# Keys whose artifacts are already in this process's PyTorch caches: Dynamo
# traces every block of a region again (its guards are per module), and
# those calls need no fetch or restore, only Inductor's in-memory cache.
_ready_in_process: set[str] = set()
# key -> the Dynamo input sources of the first graph this process keyed with it.
_first_sources: dict[str, str] = {}


def _source_variant(key: str, explanation: str, gm) -> tuple[str, str] | None:
    """The key of a graph that shares `key` with an earlier graph of this
    process but reads its inputs from other places (another frame: two
    residual adds after a graph break, `attn + residual` and `residual +
    mlp`). Its computation is the same, so its key is too, but AOTAutograd's
    cache key hashes the input sources: compiled again in-process it would
    miss the region's AOTAutograd entry, save its own outside any bundle,
    and miss again at every start. As a variant (its own key, derived from
    the region's and the sources) it is stored like a region: compiled once
    cluster-wide (a cheap compile: its FX graphs and kernels are the
    region's) and restored with its AOTAutograd entry. None for the first
    graph with `key`, and for any with the same sources (repeated blocks)."""
    sources = adaptor.input_sources(gm)
    if _first_sources.setdefault(key, sources) == sources:
        return None
    variant = hashlib.sha256(f"kcache source variant\0{key}\0{sources}".encode()).hexdigest()
    info = json.loads(explanation)
    info.update(variant_of=key, input_sources=sources)
    return variant, json.dumps(info)


def _nonzero_device_index(example_inputs: list[Any]) -> str | None:
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type != "cpu" and (t.device.index or 0) != 0:
            return str(t.device)
    return None


class RegionBackend:
    """One backend object per region class and compile settings.

    Objects compare equal when their region name and settings do, so that
    torch.compile calls on identical blocks share Dynamo's cache entries the
    way the stock "inductor" backend does.
    """

    def __init__(self, region_name: str, settings: CompileSettings, store) -> None:
        self.region_name = region_name
        self.settings = settings
        self.store = store
        self.last_key: str | None = None
        self.__name__ = f"kcache[{region_name}]"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RegionBackend) and self.region_name == other.region_name
                and self.settings == other.settings and self.store is other.store)

    def __hash__(self) -> int:
        return hash((self.region_name, repr(self.settings)))

    def key_for(self, gm, example_inputs) -> tuple[str, str]:
        return region_key(gm, example_inputs, self.region_name, self.settings)

    def _refuse(self, key: str) -> None:
        counters.bump(verify_failures=1)
        _ready_in_process.discard(key)
        offthread.carried_in_process.pop(key, None)
        self.store.drop_node_copy(key)

    def __call__(self, gm, example_inputs, **_ignored):
        patches = adaptor.inductor_config_patches(
            self.settings.mode, self.settings.options, self.settings.dynamic)
        counters.bump(regions_seen=1)
        index = _nonzero_device_index(example_inputs)
        if index is not None:
            # PyTorch bakes cuda:N into generated code; kcache keys never
            # hold the index, so it caches only regions on device index 0
            # (each rank sees its GPU as cuda:0). See docs/keys.md.
            counters.bump(bypassed=1)
            log.warning("kcache: region on %s not cached: ranks must see their GPU as "
                        "cuda:0 (CUDA_VISIBLE_DEVICES or torchrun --virtual-local-rank)", index)
            return adaptor.compile_with_inductor(gm, example_inputs, patches)
        if _device_type(example_inputs) == "cpu":
            isa_probes.ensure(self.store)  # before anything asks Inductor for its ISA
        try:
            key, explanation = self.key_for(gm, example_inputs)
        except adaptor.NotKeyable as why:
            # As PyTorch's FX-graph cache bypasses itself for a pass without
            # uuid(): compiled as stock PyTorch would, neither stored nor fetched.
            counters.bump(bypassed=1)
            _say_once(f"kcache: region {self.region_name} not cached: {why}")
            return adaptor.compile_with_inductor(gm, example_inputs, patches)
        base_key = key
        key, explanation = _source_variant(key, explanation, gm) or (key, explanation)
        self.last_key = key
        outcomes.keys_seen.append(key)
        device = _device_type(example_inputs)
        if key in _ready_in_process:
            counters.bump(reuses=1)
            if key in offthread.carried_in_process:  # a worker's region: its libraries are all here
                with adaptor.without_header_precompiling():
                    return self._compile(gm, example_inputs, patches, offthread.carried_in_process[key])
            return self._compile(gm, example_inputs, patches, b"")
        bg = background.for_store(self.store)
        if bg is not None:  # cold start without waiting: Inductor's compile goes to the worker
            handed = offthread.hand_over(self, bg, gm, example_inputs, key, base_key, explanation, device)
            if handed is not None:
                outcomes.record(key, {"label": json.loads(explanation).get("label", ""),
                                      "status": "background", "path": "traced"})
                return handed
        return self._settle(gm, example_inputs, patches, key, base_key, explanation, device)

    def switch(self, gm, key: str, base_key: str, explanation: str, carried: bytes, device: str):
        """The compiled graph for a graph that ran eagerly while the worker
        compiled its region (offthread.EagerUntilStored), once stored."""
        patches = adaptor.inductor_config_patches(
            self.settings.mode, self.settings.options, self.settings.dynamic)
        if key in _ready_in_process:
            counters.bump(reuses=1)
            with adaptor.without_header_precompiling():
                return offthread.compile_carried(offthread.carried_in_process.get(key, carried), patches)
        return self._settle(gm, None, patches, key, base_key, explanation, device, carried)

    def _compile(self, gm, example_inputs, patches, carried: bytes, *, uncached: bool = False):
        """Inductor's compile of the traced graph, or of the carried one
        (a region a compile worker compiled: its cache entries are keyed by
        that graph; outside Dynamo's call, with no example inputs, only the
        carried graph can be compiled)."""
        if carried:
            return offthread.compile_carried(carried, patches, uncached=uncached)
        if uncached:
            return adaptor.compile_uncached(gm, example_inputs, patches)
        return adaptor.compile_with_inductor(gm, example_inputs, patches)

    def _settle(self, gm, example_inputs, patches, key: str, base_key: str, explanation: str, device: str,
                carried: bytes = b""):
        """Fetch-or-compile through the store, as in wait mode: the lease
        holder (or a process that cannot reach the server) compiles here."""
        produced: dict[str, Any] = {}

        def compile_here() -> bytes:
            # Runs only where this region is compiled: the lease holder, or a
            # rank that cannot reach the server. The bundle it returns is what
            # every other rank restores.
            start = time.perf_counter()
            with adaptor.capture_region() as cap:
                produced["compiled"] = self._compile(gm, example_inputs, patches, carried)
            seconds = time.perf_counter() - start
            counters.bump(compiles=1, compile_seconds=seconds)
            blob = bundle_io.pack(key, explanation, cap, seconds, carried_graph=carried)
            counters.bump(bytes_stored=len(blob))
            return blob

        try:
            data, source = self.store.get_or_compile(key, compile_here, explanation)
        except _core.KcacheError as e:  # the client fails open; this is a last resort
            log.warning("kcache: cache unusable for %s (%s); compiling without it", key[:12], e)
            data, source = None, "error"
        except bundle_io.EmptyCapture as e:  # compiled here, nothing worth storing
            log.warning("kcache: region %s not stored: %s", key[:12], e)
            counters.bump(bypassed=1)
            data, source = None, "error"
        outcomes.record(key, {"label": json.loads(explanation).get("label", ""),
                                   "status": source, "path": "traced"})
        if "compiled" in produced or data is None:
            counters.bump(misses=1)
            _ready_in_process.add(key)
            if carried:
                offthread.carried_in_process[key] = carried
            return produced.get("compiled") or self._compile(gm, example_inputs, patches, carried)
        try:
            compiled = self._restore(gm, example_inputs, patches, key, base_key, data, source, device, carried)
            _ready_in_process.add(key)
            return compiled
        except bundle_io.WrongArch as e:
            # Cubins for another GPU arch (docs/artifact.md): refused, never run.
            counters.bump(arch_refusals=1)
            log.warning("kcache: bundle %s refused: %s; compiling here", key[:12], e)
            self.store.drop_node_copy(key)
            return self._compile(gm, example_inputs, patches, carried, uncached=True)
        except (_core.KcacheError, ValueError, OSError) as e:
            counters.bump(restore_failures=1)
            log.warning("kcache: bundle %s unusable (%s); compiling without it", key[:12], e)
            self.store.drop_node_copy(key)
            return self._compile(gm, example_inputs, patches, carried, uncached=True)

    def _restore(self, gm, example_inputs, patches, key: str, base_key: str, data: bytes, source: str,
                 device: str, carried: bytes = b""):
        bundle = bundle_io.unpack(data, key, target=short_target(device))
        if bundle.carried_graph:
            # What runs here is the carried graph: it must be this one's
            # computation, by kcache's own key (as a worker's region must
            # pass its checks on the live block), before anything is loaded.
            again = offthread.key_of_carried(self, bundle.carried_graph)
            if again != base_key:
                raise ValueError(f"its carried graph keys as {again[:12]}, this graph as {base_key[:12]}")
        adaptor.restore_region(bundle.mega_cache, bundle.binaries)
        tier = "hits_server" if source == "server" else "hits_node"
        counters.bump(**{tier: 1}, bytes_fetched=len(data),
                   compile_seconds_saved=bundle.manifest.get("compile_seconds", 0.0))
        log.info("kcache: %s hit %s %s", source, key[:12], bundle.manifest.get("label"))
        # A worker's bundle is compiled from its carried graph; a bundle
        # compiled in Dynamo's call from the traced one, which needs Dynamo's
        # example inputs (outside that call, the carried graph compiles:
        # PyTorch's caches may miss, the result is the same computation).
        carried = bundle.carried_graph or (carried if example_inputs is None else b"")
        if bundle.carried_graph:
            offthread.carried_in_process[key] = bundle.carried_graph
        with adaptor.record_loaded_libraries() as loaded, adaptor.without_header_precompiling():
            compiled = self._compile(gm, example_inputs, patches, carried)
        binary_misses.report(key, set(loaded) - set(bundle.binaries))
        if verify_first_use.enabled():
            compiled = verify_first_use.wrap(
                compiled, gm,
                recompile=lambda: self._compile(gm, example_inputs, patches, carried, uncached=True),
                on_mismatch=lambda: self._refuse(key))
        return compiled


_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.warning("%s", message)
