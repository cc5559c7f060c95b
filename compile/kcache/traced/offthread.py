"""The traced path's compile off the training thread (background mode,
docs/cold-start.md "The traced path off the thread").

Dynamo still traces on the training thread: a block with hooks inside its
forward (DeepSpeed ZeRO 3's on every submodule, a job's own on a
submodule) breaks into graphs there, and only there. What leaves the
thread is Inductor's compile of each graph whose region is not stored yet:

- hand_over(): the graph is carried (adaptor.ship_graph) and keyed again
  from the carried bytes; only a carried graph whose key equals the traced
  one's goes to the rank's compile worker (kcache.background). The backend
  returns an EagerUntilStored for it. A graph that cannot be carried
  (dynamic shapes, a tensor subclass input, something that does not
  pickle, a key that differs) is compiled on the training thread as in
  wait mode, the reason said once and counted (background_refusals).
- EagerUntilStored runs the graph as its GraphModule, eagerly, until the
  worker reports the region stored; its next call outside autograd's
  backward fetches it and switches (a step whose forward ran eagerly runs
  its backward eagerly: autograd recorded the eager ops).
- compile_and_store() is the worker's side: the carried graph compiled
  inside a capture, stored with the carried bytes in the bundle
  (bundle_io.CARRIED_GRAPH), under the region's lease, without waiting on
  another process's (TryStore).
- compile_carried(): how every process compiles a carried graph, the
  worker's first compile and each restore alike, so that PyTorch's cache
  entries, keyed by that graph, are found.
"""

from __future__ import annotations

import logging
import time

from kcache import _torch_adaptor as adaptor
from kcache.artifacts import bundle_io
from kcache.background.skeleton import NotReproducible
from kcache.state import counters

log = logging.getLogger("kcache")

# key -> the carried graph whose compile filled this process's caches for
# it: another block's graph with that key compiles this graph, not its own.
carried_in_process: dict[str, bytes] = {}


def compile_carried(blob: bytes, patches: dict, *, uncached: bool = False):
    gm, inputs, mode = adaptor.land_graph(blob)
    return adaptor.compile_landed(gm, inputs, mode, patches, uncached=uncached)


def key_of_carried(backend, blob: bytes) -> str:
    """kcache's key of a carried graph (the region's, before any source variant)."""
    landed, inputs, _ = adaptor.land_graph(blob)
    return backend.key_for(landed, inputs)[0]


def carry(backend, gm, example_inputs: list, base_key: str) -> bytes:
    """The graph's bytes; NotShippable (with the reason) when the carried
    graph is not provably the traced one."""
    try:
        blob = adaptor.ship_graph(gm, example_inputs)
        again = key_of_carried(backend, blob)
    except adaptor.NotShippable:
        raise
    except Exception as e:  # noqa: BLE001 - any failure to carry keeps the compile here
        raise adaptor.NotShippable(f"carrying the graph failed ({type(e).__name__}: {e})") from None
    if again != base_key:
        raise adaptor.NotShippable(f"the carried graph keys as {again[:12]}, the traced one as {base_key[:12]}")
    return blob


def hand_over(backend, bg, gm, example_inputs: list, key: str, base_key: str, explanation: str,
              device: str):
    """An EagerUntilStored for a graph whose region is not stored, or None:
    the backend goes on as in wait mode (the region is stored, settled, or
    the graph stays on this thread)."""
    job = bg.jobs.get(key)
    if job is None:
        if not bg.takes(device) or backend.store.lookup(key) is not None:
            return None
        try:
            blob = carry(backend, gm, example_inputs, base_key)
        except adaptor.NotShippable as why:
            bg.keep_on_thread(key, backend.region_name, f"its graph cannot be carried to the worker: {why}")
            return None
        try:
            bg.submit_graph(key, backend.region_name, backend.settings, blob, explanation)
        except NotReproducible as why:
            bg.keep_on_thread(key, backend.region_name, f"its settings cannot reach the worker: {why}")
            return None
        job = bg.jobs[key]
    if bg.settled(key):
        return None
    return EagerUntilStored(backend, bg, gm, key, base_key, explanation, job.payload, device)


class EagerUntilStored:
    """What Dynamo runs for a graph the worker compiles: the GraphModule
    until the region is stored, then the compiled graph."""

    def __init__(self, backend, bg, gm, key: str, base_key: str, explanation: str, blob: bytes,
                 device: str) -> None:
        self.backend, self.bg, self.gm = backend, bg, gm
        self.key, self.base_key, self.explanation, self.blob, self.device = key, base_key, explanation, blob, device
        self.compiled = None

    def __call__(self, *args):
        if self.compiled is not None:
            return self.compiled(*args)
        if self.bg.ready(self.key, adaptor.in_backward()):
            try:
                self.compiled = self.backend.switch(self.gm, self.key, self.base_key, self.explanation,
                                                   self.blob, self.device)
            except Exception as e:  # noqa: BLE001 - a fault never costs correctness: eager it stays
                counters.bump(background_faults=1)
                log.warning("kcache: region %s (%s) could not switch (%s: %s); its graph stays eager",
                            self.backend.region_name, self.key[:12], type(e).__name__, e)
                self.compiled = self.gm
            return self.compiled(*args)
        return self.gm(*args)


def compile_and_store(store, key: str, explanation: str, blob: bytes, settings) -> None:
    """The worker's job: fetch-or-compile the carried graph's region
    through `store` (TryStore: Busy when another process holds its lease)."""
    patches = adaptor.inductor_config_patches(settings.mode, settings.options, settings.dynamic)

    def compile_here() -> bytes:
        start = time.perf_counter()
        with adaptor.capture_region() as cap:
            compile_carried(blob, patches)
        seconds = time.perf_counter() - start
        counters.bump(compiles=1, compile_seconds=seconds)
        data = bundle_io.pack(key, explanation, cap, seconds, carried_graph=blob)
        counters.bump(bytes_stored=len(data))
        return data

    store.get_or_compile(key, compile_here, explanation)
