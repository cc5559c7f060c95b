"""PrecompiledRegion: every call of every block of one region.

A region (one distinct block structure under one set of compile settings)
runs each block through one function Dynamo compiled ahead of time
(entries.call, the block passed as an argument), PyTorch's own
AOTCompiledFunction, stored with every kernel binary it loads under a key
found without tracing (kcache.keys.block_key): a fresh process
deserializes it, with no Dynamo trace, no AOTAutograd, no Inductor code
generation and no kernel build.

A block's first call under a call signature finds its function
(variants.function_for: the index, the variant, its checks); later calls
compare what those checks read (kcache.guards.call_watch) and run it. A
block that cannot take this path (graph break, a guard or global that does
not serialize, a changed source file, hooks, a guard that fails at run
time) runs the traced path (kcache.traced.RegionBackend), said once with
the reason and counted.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, Callable

import torch

from kcache import _torch_adaptor as adaptor
from kcache.background import NotReady
from kcache.guards import call_watch
from kcache.guards import class_memo
from kcache.keys.fields import CompileSettings
from kcache.state import counters

from . import entries, hooked, variants
from .spec import fast_spec

log = logging.getLogger("kcache")

_MISSING = object()
_EAGER = object()  # the block's region is in a compile worker's hands: run it eagerly


class PrecompiledRegion:
    """One region (distinct block structure) under one set of compile settings."""

    def __init__(self, name: str, settings: CompileSettings, store,
                 traced: Callable[[torch.nn.Module], torch.nn.Module] | None, entry: str = "call",
                 background=None) -> None:
        self.name = name
        self.entry = entry  # the function compiled for every block: entries.ENTRIES
        self.settings = settings
        self.store = store
        # Cold start without waiting (kcache.background): the index and
        # variants are fetched through a store that raises NotReady for a
        # missing one, and a compile worker builds it; else the client.
        self.background = background
        self.builds = store if background is None else background.store
        self.traced = traced  # the traced path for one block: a callable (RegionBackend under torch.compile)
        self.specs: dict[tuple, variants.SpecState] = {}
        self._said: set[str] = set()
        # class descriptions shared by the first calls of all blocks, each
        # valid while its classes are unchanged (kcache/guards/class_memo.py)
        self.class_memo = class_memo.shared()
        self.forwards: PrecompiledRegion | None = None  # forward_region()

    def run(self, block: torch.nn.Module, slots: dict, args: tuple, kwargs: dict):
        """One call of one block: its precompiled function, or the traced path.

        `slots` is the block's own state: "ready" (spec -> function, or None
        for the traced path), "watch" (spec -> what its checks read:
        kcache.guards.call_watch, compared on every call) and, once needed,
        "traced" (its traced callable), "forward" (a hooked block's own
        slots in the forward region: hooked.py).
        """
        hooks = adaptor.module_hooks(block)
        if hooks:
            return self._hooked(block, slots, hooks, args, kwargs)
        return self.run_plain(block, slots, args, kwargs)

    def run_plain(self, block: torch.nn.Module, slots: dict, args: tuple, kwargs: dict):
        """run() for a block whose hooks, if any, are not in this region's
        function (a forward region's: hooked.py)."""
        spec = (block.training, fast_spec(args, kwargs))
        ready = slots["ready"]
        fn = ready.get(spec, _MISSING)
        if fn is _EAGER:
            if not self.background.ready(slots["pending"][spec], adaptor.in_backward()):
                return self._eager(block, args, kwargs)
            fn = _MISSING
        if fn is not None and fn is not _MISSING:
            watch = slots.get("watch", {}).get(spec)
            if watch is not None and not watch.unchanged(block, args, kwargs) and self._changed(watch):
                fn = _MISSING
        if fn is _MISSING:
            started = time.perf_counter()
            fn = self._first_call(block, slots, spec, args, kwargs)
            counters.bump(precompiled_first_call_seconds=time.perf_counter() - started)
            if fn is _EAGER:
                return self._eager(block, args, kwargs)
        if fn is not None:
            if adaptor.aot_guard_check(fn, block, *args, **kwargs):
                return adaptor.aot_run(fn, block, *args, **kwargs)
            reason = adaptor.aot_guard_failure(fn, block, *args, **kwargs)
            counters.bump(precompiled_guard_failures=1)
            # A change after the first call that PyTorch's guards see and no
            # watch did (requires_grad flipped on some parameters): the block
            # is keyed again, once, and a variant that fits it is used.
            again = self._first_call(block, slots, spec, args, kwargs)
            if again is _EAGER:  # that variant is in the compile worker's hands
                counters.bump(precompiled_rekeys=1)
                return self._eager(block, args, kwargs)
            if again is not None and again is not fn and adaptor.aot_guard_check(again, block, *args, **kwargs):
                counters.bump(precompiled_rekeys=1)
                return adaptor.aot_run(again, block, *args, **kwargs)
            self.say_once(f"guard:{reason}", "kcache: region %s: a precompiled guard failed for a "
                          "block (%s); that block takes the traced path", self.name, reason)
            ready[spec] = None
        if self.traced is None:  # a hooked block's forward (hooked.py): its caller decides
            return hooked.TRACED
        return self._traced(block, slots)(*args, **kwargs)

    def _eager(self, block: torch.nn.Module, args: tuple, kwargs: dict):
        """The block's own forward, while its region is being compiled
        elsewhere: the region's entry run eagerly (a block compiled in place
        runs its `_call_impl`, a hooked block its class's forward: calling
        the block would come back here)."""
        return entries.ENTRIES[self.entry](block, *args, **kwargs)

    def eager_reference(self, block: torch.nn.Module) -> Callable:
        """What a first use is compared with (KCACHE_VERIFY_FIRST_USE): the
        block's call, or for a hooked block its class's forward alone."""
        if self.entry == "forward":
            return functools.partial(entries.forward, block)
        return block._call_impl

    def _first_call(self, block: torch.nn.Module, slots: dict, spec: tuple, args: tuple, kwargs: dict):
        """The function for a block's first call under `spec` (or None: the
        traced path), and what its checks read, to watch on later calls."""
        try:
            try:
                fn, checks, trace_guard = variants.function_for(self, block, spec, args, kwargs)
            except NotReady as e:
                if self.background.submit(self, e, block, args, kwargs):
                    slots["ready"][spec] = _EAGER
                    slots.setdefault("pending", {})[spec] = e.key
                    self.background.ready(e.key, True)  # counts this eager call
                    return _EAGER
                # The block cannot go to the worker: compile it here, as before
                # (the key that was not ready may be another than its region's:
                # this machine's facts, asked first).
                with self.background.store.waiting():
                    fn, checks, trace_guard = variants.function_for(self, block, spec, args, kwargs)
        except adaptor.NotKeyable:  # a setting no key can hold: the traced path says so and bypasses
            counters.bump(precompiled_fallbacks=1)
            fn, checks, trace_guard = None, [], None
        except Exception as e:  # noqa: BLE001 - never a crash: the traced path instead
            counters.bump(precompiled_fallbacks=1)
            self.say_once(f"error:{type(e).__name__}", "kcache: region %s: precompiled path "
                          "failed (%s: %s); that block takes the traced path", self.name,
                          type(e).__name__, e)
            fn, checks, trace_guard = None, [], None
        slots["ready"][spec] = fn
        watches = slots.setdefault("watch", {})
        watches.pop(spec, None)
        if fn is not None:
            counters.bump(precompiled_blocks=1)
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
            counters.bump(precompiled_watch_refreshes=1)
            return False
        counters.bump(precompiled_rechecks=1)
        self.class_memo.clear()  # class descriptions of before the change
        for state in self.specs.values():  # and traces of before it: trace again
            state.traced_guards.clear()
        self.say_once(f"changed:{what}", "kcache: region %s: %s changed after a block's first call; "
                      "checking that block again", self.name, what)
        return True

    def _hooked(self, block: torch.nn.Module, slots: dict, hooks: list[str], args: tuple, kwargs: dict):
        """A block with module hooks. Hooks of its own only (fully_shard's,
        a job's): they run eagerly around its precompiled forward
        (hooked.py). Hooks of a submodule, global ones, or a forward that
        cannot be precompiled: the traced path (issue 32: a precompiled
        function would run the hooks its cold process had, not these)."""
        why = hooked.traced_reason(block, slots, hooks)
        if why is None:
            return hooked.call(self, block, slots, args, kwargs)
        if not slots.get("hooked_said"):  # counted once per block, as any fallback
            slots["hooked_said"] = True
            counters.bump(precompiled_fallbacks=1)
            self.say_once(why, "kcache: region %s: %s; those blocks take the traced path", self.name, why)
        return self._traced(block, slots)(*args, **kwargs)

    def forward_region(self) -> "PrecompiledRegion":
        """The region of this one's blocks' own forwards (entry "forward"),
        for blocks with hooks of their own; no traced path of its own."""
        if self.forwards is None:
            self.forwards = PrecompiledRegion(self.name, self.settings, self.store, traced=None,
                                              entry="forward", background=self.background)
        return self.forwards

    def _traced(self, block: torch.nn.Module, slots: dict) -> Callable:
        traced = slots.get("traced")
        if traced is None:
            traced = slots["traced"] = self.traced(block)
        return traced

    def say_once(self, what: str, msg: str, *args: Any) -> None:
        if what not in self._said:
            self._said.add(what)
            log.warning(msg, *args)
