"""A region's index and variants: which stored function a block uses.

Two kinds of bundle per region (docs/precompiled.md):

- the index, under the region's key: which per-block constants the kept
  guards pin (e.g. transformers' layer_idx when a KV cache is passed), or
  the reason the region cannot be precompiled;
- one variant per distinct set of those constants' values, under a key
  that adds them: the serialized function and its kernel binaries.

The rank that wins the index's lease traces one block, stores that block's
variant, then publishes the index: every other block, in this process and
on every rank, loads the variant instead of tracing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kcache import _core
from kcache import _torch_adaptor as adaptor
from kcache.artifacts import bundle_io, isa_probes, verify_first_use
from kcache.keys import block_key
from kcache.keys.make import key_of
from kcache.state import counters, outcomes

from . import build, checks, entries
from .spec import resolve_path

if TYPE_CHECKING:
    from .region import PrecompiledRegion

log = logging.getLogger("kcache")


@dataclass
class SpecState:
    """One region under one call signature: its index and loaded variants."""

    key: str
    fields: dict[str, str]
    label: str
    constants: list[str] = field(default_factory=list)
    fallback: str | None = None
    # variant key -> (function, its portable checks), or None for the traced path
    variants: dict[str, Any] = field(default_factory=dict)
    unverified: set[str] = field(default_factory=set)  # loaded, not yet compared (KCACHE_VERIFY_FIRST_USE)
    # variant key -> this process's trace check: Dynamo's guard manager for
    # the graph it traced (the stored one), or why the check failed
    traced_guards: dict[str, Any] = field(default_factory=dict)


def function_for(region: "PrecompiledRegion", block, spec: tuple, args: tuple, kwargs: dict):
    """(function, its checks, this process's trace guard) for a block's first
    call under `spec`; (None, [], None) for the traced path."""
    desc = block_key.block_description(block)
    by = (block_key.canon(desc), spec)  # blocks of one name may still differ (two Embeddings)
    state = region.specs.get(by)
    if state is None:
        state = region.specs[by] = index_for(region, block, desc, args, kwargs)
    if state.fallback is not None:
        return None, [], None
    vkey, vexpl = variant_key(state, block)
    if vkey not in state.variants:
        state.variants[vkey] = variant_for(region, state, vkey, vexpl, block, args, kwargs)
    fn = checks.checked(region, state, (vkey, vexpl), state.variants[vkey], block, args, kwargs)
    if fn is not None and vkey in state.unverified:
        state.unverified.discard(vkey)
        if not checks.verified(region, block, fn, vkey, args, kwargs):
            state.variants[vkey] = None
            return None, [], None
    if fn is None:
        return None, [], None
    guard = state.traced_guards.get(vkey)
    return fn, state.variants[vkey][1], (None if isinstance(guard, str) else guard)


def variant_key(state: SpecState, block) -> tuple[str, str]:
    try:
        constants = {p: resolve_path(block, p) for p in state.constants}
    except (AttributeError, KeyError, TypeError) as e:
        constants = {"unresolvable": repr(e)}
    requires_grad = [p.requires_grad for p in block.parameters()]
    fields = block_key.variant_fields(state.fields, constants, requires_grad)
    return key_of(fields, state.label, {"index": state.key})


def index_for(region: "PrecompiledRegion", block, desc: dict, args: tuple, kwargs: dict) -> SpecState:
    """The region's index under this call signature: fetched, or (holding
    the lease) made by compiling this block's variant first."""
    if block_key.device_of(block, args) == "cpu":
        # Before anything asks Inductor for its ISA. Through region.builds:
        # in background mode a machine type's first container hands the
        # probes to its compile worker instead of running them here.
        isa_probes.ensure(region.builds)
    fields = block_key.region_fields(block, args, kwargs, region.settings, block_desc=desc,
                                     entry=region.entry, entry_source=entries.source_digest(region.entry))
    label = block_key.label_of(region.name, block, args, kwargs, region.settings)
    key, explanation = key_of(fields, label, {"kind": "precompiled index"})
    state = SpecState(key, fields, label)
    outcomes.keys_seen.append(key)

    def produce_index() -> bytes:
        # This rank holds the region's lease: trace one block, store its
        # variant, then publish the index the other ranks wait for.
        try:
            compiled, binaries, seconds = build.compile_block(region.entry, region.settings, block, args, kwargs)
        except adaptor.PrecompileUnsupported as e:
            return bundle_io.pack_precompiled(key, explanation, index={"fallback": str(e)})
        state.constants = adaptor.aot_guarded_constants(compiled[0], "block")
        vkey, vexpl = variant_key(state, block)
        blob = build.pack_variant(vkey, vexpl, compiled, binaries, seconds)
        counters.bump(misses=1)
        state.variants[vkey] = compiled
        try:
            if not region.store.put(vkey, blob):
                log.warning("kcache: variant %s of %s kept on this node only (upload failed)",
                            vkey[:12], region.name)
        except _core.KcacheError as e:
            log.warning("kcache: variant %s of %s not stored (%s)", vkey[:12], region.name, e)
        return bundle_io.pack_precompiled(key, explanation, index={"constants": state.constants})

    try:
        data, source = _get(region, key, produce_index, explanation)
        index = bundle_io.unpack(data, key).index
        if index is None:
            raise ValueError("bundle has no precompiled index")
    except (_core.KcacheError, ValueError) as e:
        log.warning("kcache: precompiled index %s unusable (%s); tracing this region", key[:12], e)
        index, source = {"fallback": f"index unusable: {e}"}, "error"
    state.fallback = index.get("fallback")
    state.constants = list(index.get("constants", []))
    outcome = {"label": label, "status": source, "path": "traced" if state.fallback else "precompiled",
               "entry": region.entry}
    if state.fallback:
        outcome["reason"] = state.fallback
        counters.bump(precompiled_fallbacks=1)
        region.say_once("fallback", "kcache: region %s is not precompiled (%s); it takes the "
                        "traced path", region.name, state.fallback)
    outcomes.record(key, outcome)
    return state


def variant_for(region: "PrecompiledRegion", state: SpecState, vkey: str, vexpl: str, block,
                args: tuple, kwargs: dict):
    """(function, its checks) of one variant: loaded, or compiled here
    (holding its lease, or without a cache); None: the traced path."""
    produced: dict[str, Any] = {}

    def compile_variant() -> bytes:
        compiled, binaries, seconds = build.compile_block(region.entry, region.settings, block, args, kwargs)
        produced["fn"] = compiled
        return build.pack_variant(vkey, vexpl, compiled, binaries, seconds)

    try:
        data, source = _get(region, vkey, compile_variant, vexpl)
    except adaptor.PrecompileUnsupported as e:
        return _fallback(region, f"variant not precompilable: {e}")
    except _core.KcacheError as e:
        log.warning("kcache: cache unusable for %s (%s); compiling without it", vkey[:12], e)
        data, source = None, "error"
    if "fn" in produced:
        counters.bump(misses=1)
        return produced["fn"]
    if data is None:
        try:
            return build.compile_block(region.entry, region.settings, block, args, kwargs)[0]
        except adaptor.PrecompileUnsupported as e:
            return _fallback(region, str(e))
    try:
        loaded = build.load_variant(vkey, data, source, block_key.device_of(block, args))
        if verify_first_use.enabled():
            state.unverified.add(vkey)
        return loaded
    except bundle_io.WrongArch as e:
        counters.bump(arch_refusals=1)
        return _fallback(region, f"refused: {e}")
    except (adaptor.PrecompileUnsupported, _core.KcacheError, ValueError, OSError) as e:
        counters.bump(restore_failures=1)
        return _fallback(region, f"variant {vkey[:12]} unusable: {e}")


def _get(region: "PrecompiledRegion", key: str, produce, explanation: str) -> tuple[bytes | None, str]:
    """region.builds.get_or_compile, its time counted as a fetch where
    nothing was compiled here."""
    produced: list[bool] = []

    def producing() -> bytes:
        produced.append(True)
        return produce()

    start = time.perf_counter()
    try:
        return region.builds.get_or_compile(key, producing, explanation)
    finally:
        if not produced:
            counters.bump(precompiled_fetch_seconds=time.perf_counter() - start)


def _fallback(region: "PrecompiledRegion", reason: str) -> None:
    counters.bump(precompiled_fallbacks=1)
    region.say_once(reason, "kcache: region %s: %s; those blocks take the traced path", region.name, reason)
    return None
