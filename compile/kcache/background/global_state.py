"""The rank's module globals, as the compile worker must see them.

A compile worker imports the block's modules afresh, so a module global
the rank changed at run time (`m.SCALE = 0.5`, `m.helper = helper_alt`,
an entry of a module-level dict) has its import-time value there. The
region it compiled would then read the wrong value, and its portable
checks (recorded in the worker) would refuse it on the rank: the block
would take the traced path instead of switching.

So the rank sends the globals the block's code can read, found the way
Dynamo finds them: starting from every function of the block's classes
(through their MROs) and every function the block's modules hold in
their attributes, each function's names (`co_names`, nested code
included) that its module's globals bind; a global that is itself a
function (or holds functions: a registry dict, a partial, a closure's
cells) is walked in turn. Each value goes frozen (functions.py: by name,
by code or by pickle). The worker installs each one that differs from
what its own import has, by its portable description (kcache.guards.
describe) or its content (an object's state counts, which its portable
description leaves to checks of their own): a dict in place (other
modules may hold it), anything else by assignment. Values that do not
freeze, or freeze to more than MAX_VALUE_BYTES (or past MAX_TOTAL_BYTES
for the block), are left at the worker's import-time value: the portable checks decide, as before this module.

Not walked: PyTorch's and kcache's own modules and the standard library
(a job that changes their globals is not reproduced; the checks refuse
the region then), classes held in globals themselves (`m.Helper =
OtherHelper`; the block's own classes are class_state.py's), and
attributes of modules (`F.gelu = my_gelu`). The classes of objects held
in globals are carried (`type(m.LOCAL).forward = alt`), where the worker
reaches them by name (class_state.capture_named).
"""

from __future__ import annotations

import functools
import importlib
import io
import logging
import pickle
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from kcache.guards import describe

from . import class_state, functions

log = logging.getLogger("kcache")
MAX_FUNCTIONS = 2000
MAX_VALUE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 16 << 20  # all of one block's globals: the rest are left to the checks
_SKIP_TOP = frozenset({"torch", "kcache", "builtins", "__main__"}) | frozenset(sys.stdlib_module_names)


def _walked(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] not in _SKIP_TOP


def _functions_in(value: Any, depth: int = 0) -> list[types.FunctionType]:
    """The plain functions a value holds where Dynamo would call them."""
    if isinstance(value, types.FunctionType):
        return [value]
    if isinstance(value, staticmethod | classmethod):
        return _functions_in(value.__func__, depth)
    if isinstance(value, types.MethodType):
        return _functions_in(value.__func__, depth)
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType)]
    if isinstance(value, functools.partial):
        return _functions_in(value.func, depth)
    if depth < 2 and isinstance(value, dict):
        return [f for v in list(value.values())[:64] for f in _functions_in(v, depth + 1)]
    if depth < 2 and isinstance(value, list | tuple):
        return [f for v in value[:64] for f in _functions_in(v, depth + 1)]
    return []


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _class_functions(cls: type) -> list[types.FunctionType]:
    return [f for c in describe.mro_of(cls) for v in vars(c).values() for f in _functions_in(v)]


def _roots(block: torch.nn.Module) -> list[types.FunctionType]:
    roots = []
    for cls in class_state.classes_of(block):
        roots.extend(_class_functions(cls))
    for m in block.modules():  # functions in attributes, hooks included
        for value in vars(m).values():
            roots.extend(_functions_in(value))
    return roots


@dataclass
class Reachable:
    globals: dict[str, dict[str, Any]] = field(default_factory=dict)  # {module: {name: live value}}
    classes: list[type] = field(default_factory=list)  # of objects held in those globals


def reachable(block: torch.nn.Module) -> Reachable:
    """The globals the block's code can read (outside the modules not
    walked), and the classes of the objects they hold (their methods are
    walked too: `LOCAL(y)` runs LOCAL's class's forward)."""
    out = Reachable()
    todo = _roots(block)
    seen: set[int] = set()
    own = {id(c) for c in class_state.classes_of(block)}
    while todo and len(seen) < MAX_FUNCTIONS:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        for cell in fn.__closure__ or ():
            try:
                todo.extend(_functions_in(cell.cell_contents))
            except ValueError:  # an empty cell
                pass
        scope = fn.__globals__
        module = scope.get("__name__")
        if not _walked(module):
            continue
        for name in _names(fn.__code__):
            if name not in scope:
                continue  # a builtin or an attribute's name
            value = scope[name]
            if isinstance(value, types.ModuleType | type):
                continue
            out.globals.setdefault(module, {})[name] = value
            todo.extend(_functions_in(value))
            cls = type(value)
            if _walked(cls.__module__) and id(cls) not in own and not _functions_in(value):
                own.add(id(cls))
                out.classes.append(cls)
                todo.extend(_class_functions(cls))
    return out


def _too_big(value: Any) -> bool:
    """Whether a value is surely over MAX_VALUE_BYTES, without pickling it
    (a module-level tensor or model of gigabytes)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size() > MAX_VALUE_BYTES
    if isinstance(value, torch.nn.Module):
        return sum(t.numel() * t.element_size() for t in (*value.parameters(), *value.buffers())) > MAX_VALUE_BYTES
    if isinstance(value, dict | list | tuple | set | frozenset):
        return len(value) > 4096
    return False


def capture(block: torch.nn.Module) -> dict[str, Any]:
    """The globals that freeze (functions.py) to at most MAX_VALUE_BYTES
    each and MAX_TOTAL_BYTES in all, {module: {name: frozen}}, and the members of the classes of the
    objects they hold (class_state.capture_named)."""
    try:
        found = reachable(block)
    except Exception as e:  # noqa: BLE001 - the worker keeps its import's values; the checks decide
        log.info("kcache: the module globals of %s were not walked (%s: %s)", type(block).__name__,
                 type(e).__name__, e)
        return {"globals": {}, "classes": []}
    frozen_globals: dict[str, dict[str, tuple]] = {}
    total = 0
    for module, names in found.globals.items():
        for name, value in names.items():
            if _too_big(value):
                continue
            try:
                frozen = functions.freeze(value)
            except Exception:  # noqa: BLE001 - CannotFreeze, or code marshal refuses: left to the checks
                continue
            size = len(pickle.dumps(frozen))
            if size <= MAX_VALUE_BYTES and total + size <= MAX_TOTAL_BYTES:
                total += size
                frozen_globals.setdefault(module, {})[name] = frozen
    return {"globals": frozen_globals, "classes": class_state.capture_named(found.classes)}


class _Fingerprint(pickle.Pickler):
    """A value's content as bytes that do not depend on object identity:
    no memo (`fast`), a function by its portable description (code,
    defaults, closure), a class by its name."""

    def __init__(self, buf: io.BytesIO) -> None:
        super().__init__(buf, protocol=pickle.HIGHEST_PROTOCOL)
        self.fast = True  # the C pickler's own field: a class attribute would only shadow it

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType):
            return str, (describe.digest(describe.describe(obj, 1, {})),)
        if isinstance(obj, type) and obj.__module__ != "builtins":
            return str, (f"{obj.__module__}.{obj.__qualname__}",)
        return NotImplemented


def _fingerprint(value: Any) -> bytes | None:
    buf = io.BytesIO()
    try:
        _Fingerprint(buf).dump(value)
    except Exception:  # noqa: BLE001 - recursive or unpicklable: never the same
        return None
    return buf.getvalue()


def _same(have: Any, value: Any) -> bool:
    """Whether the worker's value is the rank's: the same portable
    description and the same content (an object's state counts, which
    its description leaves to checks of their own)."""
    if describe.digest(describe.describe(have, 1, {})) != describe.digest(describe.describe(value, 1, {})):
        return False
    mine = _fingerprint(have)
    return mine is not None and mine == _fingerprint(value)


def apply(state: dict[str, Any]) -> list[str]:
    """Installs the rank's globals that differ here (_same), then the
    members of their objects' classes; the globals installed
    ("module.NAME")."""
    installed = []
    for module, names in sorted(state.get("globals", {}).items()):
        try:
            scope = vars(importlib.import_module(module))
        except Exception:  # noqa: BLE001 - a module the worker cannot import: the checks decide
            continue
        for name, frozen in sorted(names.items()):
            try:
                value = functions.thaw(frozen)
            except Exception:  # noqa: BLE001 - the same
                continue
            if name in scope and _same(scope[name], value):
                continue
            have = scope.get(name)
            if type(have) is dict and type(value) is dict:
                have.clear()
                have.update(value)
            else:
                scope[name] = value
            installed.append(f"{module}.{name}")
    class_state.apply_named(state.get("classes", []))
    return installed
