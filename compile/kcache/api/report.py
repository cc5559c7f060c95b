"""What this process's kcache did: counters, keys, each region's outcome."""

from __future__ import annotations

from kcache.state import counters, outcomes, store


def stats() -> dict:
    """This process's kcache counters (hits by tier, misses, compiles, seconds
    saved), with the cache client's own under "client"."""
    out = counters.get().as_dict()
    client = store.current()
    if client is not None:
        out["client"] = client.stats()
    return out


def last_keys() -> list[str]:
    """The keys of the regions this process compiled or restored, in order."""
    return list(outcomes.keys_seen)


def region_outcomes() -> list[dict[str, str]]:
    """Each region this process keyed, in order: key, label, where its
    artifact came from ("node", "server", "compiled", "local", "error") and
    the path it took ("precompiled", or "traced", with the reason when a
    region that compile_regions would precompile could not be)."""
    return [{"key": k, **v} for k, v in outcomes.outcomes.items()]
