"""Per-process counters of what kcache did (PyTorch's own counters prove hits;
these say where they came from and what they saved)."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass


@dataclass
class Stats:
    regions_seen: int = 0
    hits_node: int = 0
    hits_server: int = 0
    misses: int = 0
    reuses: int = 0  # further blocks of a region already ready in this process
    compiles: int = 0
    bypassed: int = 0  # regions kcache declined to cache (docs/keys.md)
    restore_failures: int = 0
    arch_refusals: int = 0  # bundles with cubins for another GPU arch (docs/artifact.md)
    binary_misses: int = 0  # kernels rebuilt after a restore (docs/compile.md)
    verify_failures: int = 0  # restored regions refused by KCACHE_VERIFY_FIRST_USE
    store_failures: int = 0
    # Inductor's CPU ISA checks that really ran here (a probe library built
    # or loaded in a child Python), and the machine-facts records of the
    # server used or refused instead (kcache.artifacts.machine_facts).
    isa_probes_run: int = 0
    machine_facts_hits: int = 0
    machine_facts_refused: int = 0
    # Precompiled regions (kcache.precompiled): blocks installed on the
    # precompiled path, Dynamo traces of a region's block (cold only),
    # regions or variants that took the traced path, guards that failed,
    # and of those the blocks keyed again onto a variant that fits them.
    precompiled_blocks: int = 0
    precompiled_traces: int = 0
    precompiled_fallbacks: int = 0
    precompiled_guard_failures: int = 0
    precompiled_rekeys: int = 0
    # Blocks whose live objects differ from what their variant was compiled
    # with (a portable guard check failed: kcache.guards.portable_checks).
    precompiled_check_failures: int = 0
    # Blocks whose portable checks ran (first use per call signature) and
    # the seconds those checks took in all.
    precompiled_checks_run: int = 0
    precompiled_check_seconds: float = 0.0
    # Variants whose guards are not all portable: one Dynamo trace each per
    # process (a trace check), and the seconds those traces took.
    precompiled_trace_checks: int = 0
    precompiled_trace_check_seconds: float = 0.0
    # After a block's first call (kcache.guards.call_watch): a watched dict's tag
    # moved but nothing its checks read changed (refresh), or something did
    # and the block went through its first call's path again (recheck).
    precompiled_watch_refreshes: int = 0
    precompiled_rechecks: int = 0
    precompiled_load_seconds: float = 0.0
    # Where a warm first call's time goes (bench/warmstart's breakdown):
    # every first call of a block in all; getting indexes and variants
    # from the node tier or the server (nothing compiled here); and
    # PyTorch's deserializer, part of precompiled_load_seconds.
    precompiled_first_call_seconds: float = 0.0
    precompiled_fetch_seconds: float = 0.0
    precompiled_deserialize_seconds: float = 0.0
    # Cold start without waiting (kcache.background, docs/cold-start.md):
    # block calls that ran eagerly while their region was being compiled,
    # regions given to this rank's compile worker, those that switched to
    # compiled, the worker's compile seconds (off the training thread),
    # regions the worker could not take (compiled on the training thread)
    # and regions left eager by a worker fault; the kernel libraries the
    # worker built, those it installed from another worker instead, and
    # stored ones it refused (kcache/background/shared_kernels.py).
    eager_block_calls: int = 0
    background_jobs: int = 0
    regions_switched: int = 0
    background_compile_seconds: float = 0.0
    background_refusals: int = 0
    background_faults: int = 0
    background_kernels_built: int = 0
    background_kernels_fetched: int = 0
    background_kernels_refused: int = 0
    compile_seconds: float = 0.0
    compile_seconds_saved: float = 0.0
    bytes_fetched: int = 0
    bytes_stored: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


_lock = threading.Lock()
_stats = Stats()


def get() -> Stats:
    return _stats


def bump(**deltas) -> None:
    with _lock:
        for name, delta in deltas.items():
            setattr(_stats, name, getattr(_stats, name) + delta)


def reset() -> None:
    global _stats
    with _lock:
        _stats = Stats()
