"""Whether a loaded variant may run a live block: its portable checks, the
trace check of a variant whose guards are not all portable, and the
optional comparison with eager on first use."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from kcache import _torch_adaptor as adaptor
from kcache.artifacts import verify_first_use
from kcache.guards import describe, portable_checks
from kcache.state import counters, outcomes

from .entries import ENTRIES

if TYPE_CHECKING:
    from .region import PrecompiledRegion
    from .variants import SpecState

log = logging.getLogger("kcache")


def checked(region: "PrecompiledRegion", state: "SpecState", variant: tuple[str, str],
            compiled: tuple[Any, list] | None, block, args: tuple, kwargs: dict):
    """The function if every portable guard check of its variant passes on
    this block's live objects, else None (the traced path), said once per
    failing check, counted, and written to the miss log for `kcache
    explain` (issue 32: another process's code)."""
    if compiled is None:
        return None
    fn, checks = compiled
    start = time.perf_counter()
    failure = portable_checks.first_failure(checks, {"block": block, "args": args, "kwargs": kwargs},
                                            region.class_memo)
    counters.bump(precompiled_checks_run=1, precompiled_check_seconds=time.perf_counter() - start)
    trace = [c for c in checks if c["kind"] == "trace"]
    if failure is None and trace:
        failure = trace_check(region, state, variant[0], trace[0], block, args, kwargs)
    if failure is None:
        return fn
    counters.bump(precompiled_check_failures=1)
    region.say_once(f"check:{failure}", "kcache: region %s: a block differs from the one compiled: "
                    "%s; that block takes the traced path", region.name, failure)
    failures = outcomes.outcomes.get(state.key, {}).setdefault("check_failures", [])
    if failure not in failures:
        failures.append(failure)
        vkey, vexpl = variant
        region.store.note_check_failure(vkey, vexpl, [failure])
    return None


def trace_check(region: "PrecompiledRegion", state: "SpecState", vkey: str, check: dict, block,
                args: tuple, kwargs: dict) -> str | None:
    """A variant with guards that have no portable check: this process
    traces one block of it (Dynamo only, nothing run) and uses the stored
    function only if Dynamo's graph has the digest the cold process
    recorded; every further block must pass the guards of that trace
    (issue 32; _torch_adaptor/trace_capture.py). None when it passes, else
    the reason in words."""
    entry = state.traced_guards.get(vkey)
    if entry is None:
        region.say_once(f"trace:{vkey}", "kcache: region %s: a guard has no portable check (%s); "
                        "one block per variant is traced in this process to check the stored "
                        "function", region.name, check.get("why", "?"))
        start = time.perf_counter()
        try:
            with adaptor.traced_as_plain(block):
                digest, guards = adaptor.capture_graph(ENTRIES[region.entry], (block, *args), kwargs,
                                                       region.settings.dynamic, describe.describe)
        except Exception as e:  # noqa: BLE001 - no trace, no check: the traced path
            entry = f"trace check: Dynamo did not trace the block ({type(e).__name__}: {e})"
        else:
            entry = guards if digest == check["graph"] else (
                "trace check: the graph Dynamo traces here differs from the one compiled")
        counters.bump(precompiled_trace_checks=1,
                      precompiled_trace_check_seconds=time.perf_counter() - start)
        state.traced_guards[vkey] = entry
        return entry if isinstance(entry, str) else None  # the traced block passes its own guards
    if isinstance(entry, str):
        return entry
    if entry.check({"block": block, "args": args, "kwargs": kwargs}):
        return None
    return "trace check: a guard of this process's trace of the region fails for this block"


def verified(region: "PrecompiledRegion", block, fn, vkey: str, args: tuple, kwargs: dict) -> bool:
    """KCACHE_VERIFY_FIRST_USE=1: a loaded variant's first call compared
    with eager, forward and backward (kcache.artifacts.verify_first_use)."""
    mismatch = verify_first_use.precompiled_mismatch(
        lambda *a, **k: adaptor.aot_run(fn, block, *a, **k), block, args, kwargs,
        eager=region.eager_reference(block))
    if mismatch is None:
        return True
    if mismatch.startswith("skipped"):
        region.say_once(mismatch, "kcache: region %s: first use not compared with eager (%s)",
                        region.name, mismatch[len("skipped: "):])
        return True
    counters.bump(verify_failures=1)
    log.error("kcache: region %s: precompiled variant %s disagrees with eager on first use (%s); "
              "refusing it: its blocks take the traced path", region.name, vkey[:12], mismatch)
    region.store.drop_node_copy(vkey)
    return False
