"""The warm side of a precompiled region's portable guard checks.

Each check, recorded when the region was compiled
(kcache/_torch_adaptor/guard_checks.py), names a path of plain steps from a
local of kcache's entry function (`block`, `args`, `kwargs`) or from a
module, a kind, and the description it read then. Before a block uses a
loaded function, every check is resolved on the live objects and compared;
the first difference, in words, sends the block to the traced path
(kcache.precompiled). Runs no Dynamo: plain attribute and item reads.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from kcache.guards.describe import describe, describe_class

_MISSING = object()


def resolve(path: list[list[Any]], f_locals: dict[str, Any]) -> Any:
    """The object a check's path names, read on live objects."""
    obj: Any = _MISSING
    for step in path:
        op = step[0]
        if op == "local":
            obj = f_locals[step[1]]
        elif op == "module":
            obj = importlib.import_module(step[1])
        elif op == "attr":
            obj = getattr(obj, step[1])
        elif op == "item":
            obj = obj[step[1]]
        elif op == "type":
            obj = type(obj)
        elif op == "typedict":
            obj = dict(obj.__dict__)
        elif op == "vars":
            obj = vars(obj)
        elif op == "mro":
            obj = obj.__mro__
        elif op == "closure":
            obj = obj.__closure__
        elif op == "default":
            obj = obj.__defaults__[step[1]]
        elif op == "kwdefault":
            obj = obj.__kwdefaults__[step[1]]
        else:
            raise KeyError(f"unknown step {op!r}")
    return obj


def expected(kind: str, value: Any, arg: Any, memo: dict) -> Any:
    """What a check of `kind` reads from a resolved object (the same code
    runs at compile time and in the warm process)."""
    if kind == "value" or kind == "object":
        return describe(value, 0, memo)
    if kind == "type":
        return describe_class(type(value), 0, memo)
    if kind == "tensor":
        return describe(value, 0, memo)
    if kind == "length":
        return [type(value).__name__, str(len(value))]
    if kind == "keys":
        return [repr(k) for k in value.keys()]
    if kind == "contains":
        return repr(arg in value)
    if kind == "hasattr":
        return repr(hasattr(value, arg))
    if kind == "in_dict":
        return repr(arg in getattr(value, "__dict__", {}))
    raise ValueError(f"unknown check kind {kind!r}")


def _short(desc: Any) -> str:
    text = json.dumps(desc) if not isinstance(desc, str) else desc
    return text if len(text) <= 80 else text[:77] + "..."


def first_failure(checks: list[dict[str, Any]], f_locals: dict[str, Any],
                  memo: dict | None = None) -> str | None:
    """None when every check passes; otherwise the first failing one in
    words ("G['__import_m'].FLAG: compiled with ["bool", "False"], now ...").
    A check of kind "trace" is skipped: it takes a Dynamo trace
    (kcache.precompiled, _torch_adaptor/trace_capture.py).

    `memo` keeps class descriptions between calls: a region passes one memo
    for the first calls of all its blocks (their classes are the same), so
    a class is described once per region, not once per block."""
    memo = {} if memo is None else memo
    for c in checks:
        if c["kind"] == "trace":  # needs Dynamo: PrecompiledRegion's trace check
            continue
        try:
            now = expected(c["kind"], resolve(c["path"], f_locals), c.get("arg"), memo)
        except Exception as e:  # noqa: BLE001 - a path that no longer resolves is a difference
            return f"{c['source']} ({c['guard']}): no longer readable ({type(e).__name__}: {e})"
        if now != c["want"] and _canon(now) != _canon(c["want"]):
            return f"{c['source']} ({c['guard']}): {_difference(c['want'], now)}"
    return None


def _difference(want: Any, now: Any) -> str:
    """A difference in words; for two class descriptions, the first class of
    the MRO whose members differ."""
    if (isinstance(want, list) and isinstance(now, list) and len(want) == len(now) == 3
            and want[0] == now[0] == "class" and want[1] == now[1]):
        for w, n in zip(want[2], now[2]):
            if w != n:
                return f"the members of {w[0]} differ from when it was compiled"
        return f"the MRO of {want[1]} differs from when it was compiled"
    return f"compiled with {_short(want)}, now {_short(now)}"


def _canon(desc: Any) -> str:
    return json.dumps(desc, sort_keys=True)
