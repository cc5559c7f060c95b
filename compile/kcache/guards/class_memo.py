"""Class descriptions shared by the first calls of every block in the
process, each kept only while the classes it describes are unchanged.

A region's blocks are of one class, so their portable checks describe the
same classes (kcache.guards.describe.describe_class), and different
regions share most of theirs (torch.nn.Module's members, the model's
config class): one memo for the process (`shared()`) saves most of their
cost. Before 2026-12-06 each region had its own, and nn.Module was
described again for each of a GPT-2's six regions. The memo holds the
classes it describes for the life of the process.

But first calls under a new call signature come later (eval
after training, a new input shape), and a class member may have been
replaced in between. A plain memo then hands the checks the description
of before the change, and they pass a stored function compiled from the
old code: a false hit (found in a warm process that trained one step,
replaced a method on the block's class, then ran eval: the eval variant's
checks passed on the stale description and the old code ran).

Each entry here records the version tag of the dict behind every class
its description covers (the class's MRO, and every class described inside
it, memo hits included), read when the description was made, and is used
only while all of them are unchanged; otherwise the class is described
again. That is the same test the call watches make on every call
(kcache.guards.call_watch), with the same documented limits: a member
function whose `__code__` is replaced in place, or a class attribute
mutated in place, moves no tag.
"""

from __future__ import annotations

import gc
from typing import Any

from kcache import _torch_adaptor as adaptor

_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def _tags(cls: type) -> list[tuple[dict, int]]:
    out = []
    for c in cls.__mro__:
        if c is object or c.__flags__ & _IMMUTABLE_TYPE:
            continue
        d = gc.get_referents(c.__dict__)[0]
        out.append((d, adaptor.dict_version(d)))
    return out


_shared: "ClassMemo | None" = None


def shared() -> "ClassMemo":
    """The process's memo (made on first use, so a test's control that
    swaps the ClassMemo class for a plain dict gets its own)."""
    global _shared
    if _shared is None:
        _shared = ClassMemo()
    return _shared


class ClassMemo(dict):
    """The memo describe_class takes (it only calls `get` and sets items
    keyed by (class, depth)), with entries valid while their classes are
    unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self._open: list[list[tuple[dict, int]]] = []  # the tags of the descriptions being made

    def get(self, key: Any, default: Any = None) -> Any:
        entry = super().get(key)
        if entry is None:
            return default
        value, tags = entry
        if tags is None:  # a description being made: a class whose member is itself
            return value
        if any(adaptor.dict_version(d) != v for d, v in tags):
            del self[key]
            return default
        if self._open:
            self._open[-1].extend(tags)
        return value

    def abandon(self, key: Any) -> None:
        """A description that raised midway: its placeholder and its open
        tags go, so that no later call takes the placeholder for a class
        being described."""
        if super().get(key, (None, ()))[1] is None:
            super().pop(key, None)
            if self._open:
                self._open.pop()

    def __setitem__(self, key: Any, value: Any) -> None:
        if super().get(key, (None, ()))[1] is None:  # the description is done
            tags = list({id(d): (d, v) for d, v in self._open.pop()}.values())  # each dict once
            if self._open:
                self._open[-1].extend(tags)
            super().__setitem__(key, (value, tags))
        else:  # its placeholder: the description starts
            self._open.append(_tags(key[0]))
            super().__setitem__(key, (value, None))
