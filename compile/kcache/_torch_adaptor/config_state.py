"""When the compiler configuration last changed, cheaply: config_fingerprint
(config_key.py) costs about 3 ms (three configs, some 840 entries, each
serialized and hashed), and a warm start asks for it once per region and
call signature. It is recomputed only when what it reads has changed.

What it reads is each entry's value, found as torch's own `_get_dict`
finds it: an environment variable's forced value, else the value a user
set (a ContextVar: `cfg.x = v` and `cfg.patch()` both set it), else the
environment's default, else the default. The state kept here is, per
entry, that object (compared by identity) where it is a plain immutable
value, and its text otherwise: a container or an object edited in place
keeps its identity, and reading a mutable entry gives the user a deep copy
of the default (a new object, the same text).

A torch whose configs do not have this layout gets no memo (state() is
None: the fingerprint is computed on every call); the pinned torch's
layout is checked by tests/python/compile/test_config_state.py.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def state(configs: tuple, text: Callable[[Any], str]) -> tuple[list, list] | None:
    """(the plain values, the texts of the others) of every entry,
    or None where the layout is not the one this module knows."""
    from torch.utils import _config_module

    unset = getattr(_config_module, "_UNSET_SENTINEL", None)
    objects: list = []
    texts: list = []
    try:
        for cfg in configs:
            entries = cfg._config
            objects.append(entries)
            for entry in entries.values():
                value = entry.env_value_force
                if value is unset:
                    value = entry.user_override.get()
                    if value is unset:
                        value = entry.env_value_default
                        if value is unset:
                            value = entry.default
                if type(value) in _PLAIN:
                    objects.append(value)
                else:
                    objects.append(_PLAIN)
                    texts.append(text(value))
    except AttributeError:
        return None
    return (objects, texts) if unset is not None else None


def same(a: tuple[list, list] | None, b: tuple[list, list] | None) -> bool:
    """Whether two states are of an unchanged configuration."""
    if a is None or b is None:
        return False
    return (len(a[0]) == len(b[0]) and all(map(operator.is_, a[0], b[0])) and a[1] == b[1])
