"""Precompiled regions: warm starts that skip Dynamo.

Every block of a region runs through one function Dynamo compiled ahead of
time, `call(block, *args, **kwargs)`, with the block passed as an argument
so that one trace serves every identical block. The function is PyTorch's
own AOTCompiledFunction (Dynamo's bytecode, the guards PyTorch keeps on
this path, and AOTAutograd's bundled entry with Inductor's compiled graphs,
the backward lowered eagerly). kcache stores it with every kernel binary it
loads, under a key found without tracing (kcache.precompiled_key), and a
fresh process deserializes it: no Dynamo trace, no AOTAutograd, no Inductor
code generation, no kernel build.

Two kinds of bundle per region (docs/precompiled.md):

- the index, under the region's key: which per-block constants the kept
  guards pin (e.g. transformers' layer_idx when a KV cache is passed), or
  the reason the region cannot be precompiled;
- one variant per distinct set of those constants' values, under a key
  that adds them: the serialized function and its kernel binaries.

The rank that wins the index's lease traces one block, stores that block's
variant, then publishes the index: every other block, in this process and
on every rank, loads the variant instead of tracing. A region that cannot
take this path (graph break, a guard or global that does not serialize, a
changed source file, a guard that fails at run time) runs today's traced
path (kcache.backend.RegionBackend), said once with the reason and counted.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from . import _core, bundle_io, call_watch, describe, isa_probes, portable_checks, state_dict_keys, verify_first_use
from . import _torch_adaptor as adaptor
from . import counters as stats
from . import precompiled_key as pk
from .backend import drop_node_copy
from .keyfields import CompileSettings, short_target

log = logging.getLogger("kcache")

_MISSING = object()


def call(block, *args, **kwargs):
    """The function Dynamo compiles for every precompiled region."""
    return block(*args, **kwargs)


def call_impl(block, *args, **kwargs):
    """The function Dynamo compiles for blocks compiled in place
    (kcache.precompiled_in_place): what nn.Module.compile() compiles."""
    return block._call_impl(*args, **kwargs)


_ENTRIES = {"call": call, "call_impl": call_impl}
_F_GLOBALS = globals()


def _fast_spec(args: tuple, kwargs: dict) -> tuple:
    """A cheap hashable summary of what selects a compiled function: grad
    mode, autocast, and each argument's tensor metadata or plain value."""

    def one(v: Any):
        if isinstance(v, torch.Tensor):
            return (v.shape, v.stride(), v.dtype, v.device.type, v.requires_grad)
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, list | tuple):
            return tuple(one(x) for x in v)
        return type(v)

    autocast = tuple((d, torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")
                     if torch.is_autocast_enabled(d))
    return (torch.is_grad_enabled(), autocast, tuple(one(a) for a in args),
            tuple(sorted((k, one(v)) for k, v in kwargs.items())))


def _resolve_path(block: torch.nn.Module, path: str) -> Any:
    """Reads "._modules['attn'].layer_idx" below `block`."""
    obj: Any = block
    for part in path.replace("._modules['", ".\x00").split("."):
        if not part:
            continue
        if part.startswith("\x00"):
            obj = obj._modules[part[1:].rstrip("']")]
        else:
            obj = getattr(obj, part)
    return obj if obj is None or isinstance(obj, bool | int | float | str) else repr(obj)


@dataclass
class _SpecState:
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


class PrecompiledRegion:
    """One region (distinct block structure) under one set of compile settings."""

    def __init__(self, name: str, settings: CompileSettings, store,
                 traced: Callable[[torch.nn.Module], torch.nn.Module], entry: str = "call") -> None:
        self.name = name
        self.entry = entry  # the function compiled for every block: _ENTRIES
        self.settings = settings
        self.store = store
        self.traced = traced  # today's path for one block: a callable (RegionBackend under torch.compile)
        self._specs: dict[tuple, _SpecState] = {}
        self._said: set[str] = set()
        self._class_memo: dict = {}  # class descriptions, shared by the first calls of its blocks

    # ------------------------------------------------------------ running

    def run(self, block: torch.nn.Module, slots: dict, args: tuple, kwargs: dict):
        """One call of one block: its precompiled function, or the traced path.

        `slots` is the block's own state: "ready" (spec -> function, or None
        for the traced path), "watch" (spec -> what its checks read:
        kcache.call_watch, compared on every call) and, once needed,
        "traced" (its traced callable).
        """
        hooks = adaptor.module_hooks(block)
        if hooks:
            return self._hooked(block, slots, hooks)(*args, **kwargs)
        spec = (block.training, _fast_spec(args, kwargs))
        ready = slots["ready"]
        fn = ready.get(spec, _MISSING)
        if fn is not None and fn is not _MISSING:
            watch = slots.get("watch", {}).get(spec)
            if watch is not None and not watch.unchanged(block, args, kwargs) and self._changed(watch):
                fn = _MISSING
        if fn is _MISSING:
            fn = self._first_call(block, slots, spec, args, kwargs)
        if fn is not None:
            if adaptor.aot_guard_check(fn, block, *args, **kwargs):
                return adaptor.aot_run(fn, block, *args, **kwargs)
            reason = adaptor.aot_guard_failure(fn, block, *args, **kwargs)
            stats.bump(precompiled_guard_failures=1)
            self.say_once(f"guard:{reason}", "kcache: region %s: a precompiled guard failed for a "
                           "block (%s); that block takes the traced path", self.name, reason)
            ready[spec] = None
        return self._traced(block, slots)(*args, **kwargs)

    def _first_call(self, block: torch.nn.Module, slots: dict, spec: tuple, args: tuple, kwargs: dict):
        """The function for a block's first call under `spec` (or None: the
        traced path), and what its checks read, to watch on later calls."""
        try:
            fn, checks, trace_guard = self._function_for(block, spec, args, kwargs)
        except Exception as e:  # noqa: BLE001 - never a crash: the traced path instead
            stats.bump(precompiled_fallbacks=1)
            self.say_once(f"error:{type(e).__name__}", "kcache: region %s: precompiled path "
                           "failed (%s: %s); that block takes the traced path", self.name,
                           type(e).__name__, e)
            fn, checks, trace_guard = None, [], None
        slots["ready"][spec] = fn
        watches = slots.setdefault("watch", {})
        watches.pop(spec, None)
        if fn is not None:
            stats.bump(precompiled_blocks=1)
            watch = call_watch.collect(checks, block, trace_guard)
            if watch is not None:
                watches[spec] = watch
        return fn

    def _changed(self, watch: "call_watch.Watch") -> bool:
        """A watched tag moved since the block's checks passed: whether
        something a check read really changed (then the block goes through
        its first call's path again), said once per change and counted."""
        what = watch.still_valid()
        if what is None:
            stats.bump(precompiled_watch_refreshes=1)
            return False
        stats.bump(precompiled_rechecks=1)
        self._class_memo.clear()  # class descriptions of before the change
        for state in self._specs.values():  # and traces of before it: trace again
            state.traced_guards.clear()
        self.say_once(f"changed:{what}", "kcache: region %s: %s changed after a block's first call; "
                       "checking that block again", self.name, what)
        return True

    def _checked(self, block, state: _SpecState, variant: tuple[str, str],
                 compiled: tuple[Any, list] | None, args: tuple, kwargs: dict):
        """The function if every portable guard check of its variant passes
        on this block's live objects, else None (the traced path), said once
        per failing check, counted, and written to the miss log for `kcache
        explain` (issue 32: another process's code)."""
        if compiled is None:
            return None
        fn, checks = compiled
        start = time.perf_counter()
        failure = portable_checks.first_failure(checks, {"block": block, "args": args, "kwargs": kwargs},
                                                self._class_memo)
        stats.bump(precompiled_checks_run=1, precompiled_check_seconds=time.perf_counter() - start)
        trace = [c for c in checks if c["kind"] == "trace"]
        if failure is None and trace:
            failure = self._trace_check(state, variant[0], trace[0], block, args, kwargs)
        if failure is None:
            return fn
        stats.bump(precompiled_check_failures=1)
        self.say_once(f"check:{failure}", "kcache: region %s: a block differs from the one compiled: "
                       "%s; that block takes the traced path", self.name, failure)
        from .backend import _outcomes

        failures = _outcomes.get(state.key, {}).setdefault("check_failures", [])
        if failure not in failures:
            failures.append(failure)
            vkey, vexpl = variant
            self.store.note_check_failure(vkey, vexpl, [failure])
        return None

    def _trace_check(self, state: _SpecState, vkey: str, check: dict, block, args: tuple,
                     kwargs: dict) -> str | None:
        """A variant with guards that have no portable check: this process
        traces one block of it (Dynamo only, nothing run) and uses the stored
        function only if Dynamo's graph has the digest the cold process
        recorded; every further block must pass the guards of that trace
        (issue 32; _torch_adaptor/trace_capture.py). None when it passes,
        else the reason in words."""
        entry = state.traced_guards.get(vkey)
        if entry is None:
            self.say_once(f"trace:{vkey}", "kcache: region %s: a guard has no portable check (%s); "
                           "one block per variant is traced in this process to check the stored "
                           "function", self.name, check.get("why", "?"))
            start = time.perf_counter()
            try:
                digest, guards = adaptor.capture_graph(_ENTRIES[self.entry], (block, *args), kwargs,
                                                       self.settings.dynamic, describe.describe)
            except Exception as e:  # noqa: BLE001 - no trace, no check: the traced path
                entry = f"trace check: Dynamo did not trace the block ({type(e).__name__}: {e})"
            else:
                entry = guards if digest == check["graph"] else (
                    "trace check: the graph Dynamo traces here differs from the one compiled")
            stats.bump(precompiled_trace_checks=1,
                       precompiled_trace_check_seconds=time.perf_counter() - start)
            state.traced_guards[vkey] = entry
            return entry if isinstance(entry, str) else None  # the traced block passes its own guards
        if isinstance(entry, str):
            return entry
        if entry.check({"block": block, "args": args, "kwargs": kwargs}):
            return None
        return "trace check: a guard of this process's trace of the region fails for this block"

    def _hooked(self, block: torch.nn.Module, slots: dict, hooks: list[str]) -> Callable:
        """The traced path for a block with hooks (issue 32: a precompiled
        function would run the hooks its cold process had, not these)."""
        if not slots.get("hooked"):
            slots["hooked"] = True
            why = "the block has module hooks (" + ", ".join(hooks) + ")"
            stats.bump(precompiled_fallbacks=1)
            self.say_once(why, "kcache: region %s: %s; those blocks take the traced path", self.name, why)
        return self._traced(block, slots)

    def _traced(self, block: torch.nn.Module, slots: dict) -> Callable:
        traced = slots.get("traced")
        if traced is None:
            traced = slots["traced"] = self.traced(block)
        return traced

    def say_once(self, what: str, msg: str, *args: Any) -> None:
        if what not in self._said:
            self._said.add(what)
            log.warning(msg, *args)

    # ------------------------------------------------------------ resolving

    def _function_for(self, block, spec: tuple, args: tuple, kwargs: dict):
        desc = pk.block_description(block)
        by = (pk.canon(desc), spec)  # blocks of one name may still differ (two Embeddings)
        state = self._specs.get(by)
        if state is None:
            state = self._specs[by] = self._index(block, desc, args, kwargs)
        if state.fallback is not None:
            return None, [], None
        vkey, vexpl = self._variant_key(state, block)
        if vkey not in state.variants:
            state.variants[vkey] = self._variant(state, vkey, vexpl, block, args, kwargs)
        fn = self._checked(block, state, (vkey, vexpl), state.variants[vkey], args, kwargs)
        if fn is not None and vkey in state.unverified:
            state.unverified.discard(vkey)
            if not self._verified(block, fn, vkey, args, kwargs):
                state.variants[vkey] = None
                return None, [], None
        if fn is None:
            return None, [], None
        guard = state.traced_guards.get(vkey)
        return fn, state.variants[vkey][1], (None if isinstance(guard, str) else guard)

    def _verified(self, block, fn, vkey: str, args: tuple, kwargs: dict) -> bool:
        """KCACHE_VERIFY_FIRST_USE=1: a loaded variant's first call compared
        with eager, forward and backward (kcache.verify_first_use)."""
        mismatch = verify_first_use.precompiled_mismatch(
            lambda *a, **k: adaptor.aot_run(fn, block, *a, **k), block, args, kwargs)
        if mismatch is None:
            return True
        if mismatch.startswith("skipped"):
            self.say_once(mismatch, "kcache: region %s: first use not compared with eager (%s)",
                          self.name, mismatch[len("skipped: "):])
            return True
        stats.bump(verify_failures=1)
        log.error("kcache: region %s: precompiled variant %s disagrees with eager on first use (%s); "
                  "refusing it: its blocks take the traced path", self.name, vkey[:12], mismatch)
        drop_node_copy(self.store, vkey)
        return False

    def _variant_key(self, state: _SpecState, block) -> tuple[str, str]:
        try:
            constants = {p: _resolve_path(block, p) for p in state.constants}
        except (AttributeError, KeyError, TypeError) as e:
            constants = {"unresolvable": repr(e)}
        requires_grad = [p.requires_grad for p in block.parameters()]
        fields = pk.variant_fields(state.fields, constants, requires_grad)
        return pk.key_of(fields, state.label, {"index": state.key})

    def _index(self, block, desc: dict, args: tuple, kwargs: dict) -> _SpecState:
        if pk.device_of(block, args) == "cpu":
            isa_probes.ensure(self.store)  # before anything asks Inductor for its ISA
        fields = pk.region_fields(block, args, kwargs, self.settings, block_desc=desc, entry=self.entry)
        label = pk.label_of(self.name, block, args, kwargs, self.settings)
        key, explanation = pk.key_of(fields, label, {"kind": "precompiled index"})
        state = _SpecState(key, fields, label)
        from .backend import _keys_seen, _outcomes

        _keys_seen.append(key)

        def produce_index() -> bytes:
            # This rank holds the region's lease: trace one block, store its
            # variant, then publish the index the other ranks wait for.
            try:
                fn, blob, vkey = self._compile_first(state, block, args, kwargs)
            except adaptor.PrecompileUnsupported as e:
                return bundle_io.pack_precompiled(key, explanation, index={"fallback": str(e)})
            state.variants[vkey] = fn
            try:
                if not self.store.put(vkey, blob):
                    log.warning("kcache: variant %s of %s kept on this node only (upload failed)",
                                vkey[:12], self.name)
            except _core.KcacheError as e:
                log.warning("kcache: variant %s of %s not stored (%s)", vkey[:12], self.name, e)
            return bundle_io.pack_precompiled(key, explanation,
                                              index={"constants": state.constants})

        try:
            data, source = self.store.get_or_compile(key, produce_index, explanation)
            index = bundle_io.unpack(data, key).index
            if index is None:
                raise ValueError("bundle has no precompiled index")
        except (_core.KcacheError, ValueError) as e:
            log.warning("kcache: precompiled index %s unusable (%s); tracing this region",
                        key[:12], e)
            index, source = {"fallback": f"index unusable: {e}"}, "error"
        state.fallback = index.get("fallback")
        state.constants = list(index.get("constants", []))
        outcome = {"label": label, "status": source,
                   "path": "traced" if state.fallback else "precompiled"}
        if state.fallback:
            outcome["reason"] = state.fallback
            stats.bump(precompiled_fallbacks=1)
            self.say_once("fallback", "kcache: region %s is not precompiled (%s); it takes the "
                           "traced path", self.name, state.fallback)
        _outcomes.setdefault(key, outcome)
        return state

    def _compile(self, block, args: tuple, kwargs: dict) -> tuple[tuple[Any, list], dict[str, bytes], float]:
        """(function, its portable checks), the kernel binaries it loaded, seconds."""
        start = time.perf_counter()
        checks: list = []
        trace_needed: list[str] = []
        with adaptor.record_loaded_libraries() as libraries:
            fn = adaptor.aot_compile_call(_ENTRIES[self.entry], (block, *args), kwargs,
                                          self.settings.mode, self.settings.options,
                                          self.settings.dynamic, checks=checks,
                                          trace_needed=trace_needed)
        if trace_needed:  # no portable check for some guard: warm processes trace one block
            try:
                digest, _ = adaptor.capture_graph(_ENTRIES[self.entry], (block, *args), kwargs,
                                                  self.settings.dynamic, describe.describe)
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
        stats.bump(precompiled_traces=1, compiles=1, compile_seconds=seconds)
        return (fn, checks), binaries, seconds

    def _pack_variant(self, vkey: str, vexpl: str, compiled: tuple[Any, list], binaries,
                      seconds: float) -> bytes:
        fn, checks = compiled
        blob = bundle_io.pack_precompiled(
            vkey, vexpl, aot_function=adaptor.serialize_aot(fn), binaries=binaries,
            compile_seconds=seconds, extra={"inlined_sources": adaptor.inlined_sources(fn),
                   "extern_kernels": adaptor.extern_kernel_table(), "portable_checks": checks})
        stats.bump(bytes_stored=len(blob))
        return blob

    def _compile_first(self, state: _SpecState, block, args, kwargs):
        compiled, binaries, seconds = self._compile(block, args, kwargs)
        state.constants = adaptor.aot_guarded_constants(compiled[0], "block")
        vkey, vexpl = self._variant_key(state, block)
        blob = self._pack_variant(vkey, vexpl, compiled, binaries, seconds)
        stats.bump(misses=1)
        return compiled, blob, vkey

    def _variant(self, state: _SpecState, vkey: str, vexpl: str, block, args, kwargs):
        produced: dict[str, Any] = {}

        def compile_variant() -> bytes:
            compiled, binaries, seconds = self._compile(block, args, kwargs)
            produced["fn"] = compiled
            return self._pack_variant(vkey, vexpl, compiled, binaries, seconds)

        try:
            data, source = self.store.get_or_compile(vkey, compile_variant, vexpl)
        except adaptor.PrecompileUnsupported as e:
            return self._variant_fallback(state, f"variant not precompilable: {e}")
        except _core.KcacheError as e:
            log.warning("kcache: cache unusable for %s (%s); compiling without it", vkey[:12], e)
            data, source = None, "error"
        if "fn" in produced:
            stats.bump(misses=1)
            return produced["fn"]
        if data is None:
            try:
                return self._compile(block, args, kwargs)[0]
            except adaptor.PrecompileUnsupported as e:
                return self._variant_fallback(state, str(e))
        try:
            loaded = self._load(vkey, data, source, pk.device_of(block, args))
            if verify_first_use.enabled():
                state.unverified.add(vkey)
            return loaded
        except bundle_io.WrongArch as e:
            stats.bump(arch_refusals=1)
            return self._variant_fallback(state, f"refused: {e}")
        except (adaptor.PrecompileUnsupported, _core.KcacheError, ValueError, OSError) as e:
            stats.bump(restore_failures=1)
            return self._variant_fallback(state, f"variant {vkey[:12]} unusable: {e}")

    def _variant_fallback(self, state: _SpecState, reason: str) -> None:
        stats.bump(precompiled_fallbacks=1)
        self.say_once(reason, "kcache: region %s: %s; those blocks take the traced path",
                       self.name, reason)
        return None

    def _load(self, vkey: str, data: bytes, source: str, device: str):
        start = time.perf_counter()
        bundle = bundle_io.unpack(data, vkey, target=short_target(device))
        if not bundle.aot_function:
            raise ValueError("bundle has no precompiled function")
        checks = bundle.manifest.get("portable_checks")
        if not isinstance(checks, list):
            raise ValueError("bundle carries no portable guard checks")
        adaptor.restore_region(b"", bundle.binaries)
        with adaptor.record_loaded_libraries() as loaded:
            fn = adaptor.deserialize_aot(bundle.aot_function, _F_GLOBALS,
                                         bundle.manifest.get("extern_kernels"))
        from .backend import _report_binary_misses

        _report_binary_misses(vkey, set(loaded) - set(bundle.binaries))
        tier = "hits_server" if source == "server" else "hits_node"
        stats.bump(**{tier: 1}, bytes_fetched=len(data),
                   precompiled_load_seconds=time.perf_counter() - start,
                   compile_seconds_saved=bundle.manifest.get("compile_seconds", 0.0))
        log.info("kcache: %s hit %s %s (precompiled)", source, vkey[:12], bundle.manifest.get("label"))
        return fn, checks


class PrecompiledBlock(adaptor.OptimizedModule):
    """A block whose forward runs its region's precompiled function.

    To everything that looks it is the module torch.compile returns: an
    instance of OptimizedModule, the original block as its submodule
    `_orig_mod`, attribute reads and writes passed through to the block,
    `training` mirrored; its state_dict keys are the block's own
    (kcache.state_dict_keys). So Accelerate's
    has_compiled_regions / extract_model_from_parallel (unwrap_model, every
    save path) and PEFT see a compiled region (docs/compatibility.md). It
    has no Dynamo context: its forward is kcache's.
    """

    def __init__(self, block: torch.nn.Module, region: PrecompiledRegion) -> None:
        adaptor.init_optimized_module(self, block)
        state_dict_keys.plain_keys(self)
        self.__dict__["_kc_region"] = region
        self.__dict__["_kc_slots"] = {"ready": {}}

    def forward(self, *args: Any, **kwargs: Any):
        return self.__dict__["_kc_region"].run(self._modules["_orig_mod"], self.__dict__["_kc_slots"],
                                               args, kwargs)

    def __deepcopy__(self, memo: dict) -> "PrecompiledBlock":
        # A copy of the block on the same region (regions are per process,
        # shared by identical blocks); its own first-call state.
        return PrecompiledBlock(copy.deepcopy(self._modules["_orig_mod"], memo), self.__dict__["_kc_region"])

    def __copy__(self) -> "PrecompiledBlock":
        new = PrecompiledBlock.__new__(PrecompiledBlock)
        new.__dict__.update(self.__dict__)
        new.__dict__["_kc_slots"] = {"ready": {}}
        return new

    def __reduce__(self):
        raise TypeError("a kcache precompiled block does not pickle (its region holds the cache client): "
                        "pickle its _orig_mod, or the model accelerate's unwrap_model(..., "
                        "keep_torch_compile=False) returns")

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
