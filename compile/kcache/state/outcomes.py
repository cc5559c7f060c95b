"""What this process did with each region it keyed (both paths write here;
kcache.api.last_keys() and region_outcomes() read it, kcache.prewarm
reports it)."""

from __future__ import annotations

# Every key this process computed, in order.
keys_seen: list[str] = []
# key -> {"label", "status", "path", ...}: what happened to each region the
# first time it was seen here (status: the client's source — "node",
# "server", "compiled", "local" — or "error"; path: "precompiled" or
# "traced", with the reason when a region that could have been precompiled
# was not; check_failures: the portable checks that sent blocks away).
outcomes: dict[str, dict] = {}


def record(key: str, outcome: dict) -> dict:
    """The outcome kept for `key`: the first one recorded."""
    return outcomes.setdefault(key, outcome)
