"""Making and loading one variant: Dynamo's aot_compile of a block with its
portable checks, the bundle it is stored as, and that bundle loaded back."""

from __future__ import annotations

import logging
import time
from typing import Any

from kcache import _torch_adaptor as adaptor
from kcache.artifacts import binary_misses, bundle_io
from kcache.guards import describe, portable_checks
from kcache.keys.fields import CompileSettings, short_target
from kcache.state import counters

from .entries import ENTRIES, F_GLOBALS

log = logging.getLogger("kcache")


def compile_block(entry: str, settings: CompileSettings, block, args: tuple,
                  kwargs: dict) -> tuple[tuple[Any, list], dict[str, bytes], float]:
    """(function, its portable checks), the kernel binaries it loaded, seconds.

    Raises adaptor.PrecompileUnsupported when the block cannot take the
    precompiled path (a graph break, a guard that does not serialize, a
    check that is not stable even on its own block)."""
    start = time.perf_counter()
    checks: list = []
    trace_needed: list[str] = []
    with adaptor.record_loaded_libraries() as libraries, adaptor.traced_as_plain(block):
        fn = adaptor.aot_compile_call(ENTRIES[entry], (block, *args), kwargs, settings.mode,
                                      settings.options, settings.dynamic, checks=checks,
                                      trace_needed=trace_needed, resolve=portable_checks.resolve,
                                      expected=portable_checks.expected)
    if trace_needed:  # no portable check for some guard: warm processes trace one block
        try:
            with adaptor.traced_as_plain(block):
                digest, _ = adaptor.capture_graph(ENTRIES[entry], (block, *args), kwargs,
                                                  settings.dynamic, describe.describe)
        except Exception as e:  # noqa: BLE001 - no trace check possible: the traced path
            raise adaptor.PrecompileUnsupported(f"a guard has no portable check ({trace_needed[0]}) "
                                                f"and the block does not trace for a trace check: {e}")
        checks[:] = [{"kind": "trace", "guard": "TRACE", "source": "Dynamo's graph of the block",
                      "why": trace_needed[0], "graph": digest}]
    failure = portable_checks.first_failure(checks, {"block": block, "args": args, "kwargs": kwargs})
    if failure is not None:  # a description that is not stable even here
        raise adaptor.PrecompileUnsupported(f"a portable check fails on its own block: {failure}")
    root = adaptor.inductor_cache_dir()
    binaries = {rel: (root / rel).read_bytes() for rel in libraries}
    seconds = time.perf_counter() - start
    counters.bump(precompiled_traces=1, compiles=1, compile_seconds=seconds)
    return (fn, checks), binaries, seconds


def pack_variant(vkey: str, vexpl: str, compiled: tuple[Any, list], binaries: dict[str, bytes],
                 seconds: float) -> bytes:
    """The bundle of one variant: the serialized function, its kernel
    binaries, what it inlined and its portable checks."""
    fn, checks = compiled
    blob = bundle_io.pack_precompiled(
        vkey, vexpl, aot_function=adaptor.serialize_aot(fn), binaries=binaries,
        compile_seconds=seconds, extra={"inlined_sources": adaptor.inlined_sources(fn),
                                        "extern_kernels": adaptor.extern_kernel_table(),
                                        "portable_checks": checks})
    counters.bump(bytes_stored=len(blob))
    return blob


def load_variant(vkey: str, data: bytes, source: str, device: str) -> tuple[Any, list]:
    """(function, its portable checks) from a stored variant's bytes: its
    binaries restored where Inductor looks, the function deserialized."""
    start = time.perf_counter()
    bundle = bundle_io.unpack(data, vkey, target=short_target(device))
    if not bundle.aot_function:
        raise ValueError("bundle has no precompiled function")
    checks = bundle.manifest.get("portable_checks")
    if not isinstance(checks, list):
        raise ValueError("bundle carries no portable guard checks")
    adaptor.restore_region(b"", bundle.binaries)
    started = time.perf_counter()
    with adaptor.record_loaded_libraries() as loaded:
        fn = adaptor.deserialize_aot(bundle.aot_function, F_GLOBALS, bundle.manifest.get("extern_kernels"))
    counters.bump(precompiled_deserialize_seconds=time.perf_counter() - started)
    binary_misses.report(vkey, set(loaded) - set(bundle.binaries))
    tier = "hits_server" if source == "server" else "hits_node"
    counters.bump(**{tier: 1}, bytes_fetched=len(data),
                  precompiled_load_seconds=time.perf_counter() - start,
                  compile_seconds_saved=bundle.manifest.get("compile_seconds", 0.0))
    log.info("kcache: %s hit %s %s (precompiled)", source, vkey[:12], bundle.manifest.get("label"))
    return fn, checks
