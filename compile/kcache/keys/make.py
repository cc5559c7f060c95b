"""The one place key fields become a key: the C++ core hashes them
(keys/cache_key.hpp) and explains them (what `kcache explain` shows)."""

from __future__ import annotations

from kcache import _core


def key_of(fields: dict[str, str], label: str, details: dict[str, str] | None = None) -> tuple[str, str]:
    """(64-hex key, explanation JSON) of canonical text fields."""
    raw = {k: v.encode() for k, v in fields.items()}
    return _core.compute_key(raw), _core.explain_key(raw, label, details or {})
