"""Functions another process cannot import, carried to it by their code;
classes defined in a function's scope, carried by the module-level name
that holds them.

A function defined inside another (a closure, a lambda held in an
attribute, a hook) or one whose module attribute names another object
cannot be pickled by reference. Frozen here: its code (marshal: the
compile worker runs the same interpreter), its module's name (the thawed
function's globals are that module as the worker imports it), defaults,
keyword defaults and closure cells, each frozen in turn; anything else by
pickle. Used for the block's classes (class_state.py), the module
globals its code reads (global_state.py), and the block and its call
(skeleton.py).

A class defined inside a function (as the `kernels` package makes its
layers) is not frozen: it pickles by a name its module binds to it at
module level (`LocalCls = _make()`), which the worker's import binds to
the same definition; without such a name it does not copy.
"""

from __future__ import annotations

import builtins
import importlib
import io
import marshal
import pickle
import sys
import types
from typing import Any


class CannotFreeze(Exception):
    pass


def resolve(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def importable(obj: types.FunctionType | type) -> bool:
    """Whether another process's import reaches this function or class by
    its module and qualname."""
    if "<locals>" in obj.__qualname__:
        return False
    try:
        return resolve(obj.__module__, obj.__qualname__) is obj
    except (ImportError, AttributeError, ValueError):
        return False


def module_alias(cls: type) -> str | None:
    """The module-level name bound to a class its qualname does not reach
    (defined inside a function); None for __main__ (the worker's __main__
    is another module) or when there is none."""
    module = sys.modules.get(cls.__module__)
    if module is None or cls.__module__ == "__main__":
        return None
    for name, value in list(vars(module).items()):
        if value is cls:
            return name
    return None


def class_ref(cls: type) -> tuple | None:
    """A frozen reference to a class that thaws to the worker's own: by
    module and qualname, or by the module-level name bound to it; None
    when another process cannot reach it."""
    if importable(cls):
        return ("import", cls.__module__, cls.__qualname__)
    name = module_alias(cls)
    return None if name is None else ("import", cls.__module__, name)


def _freeze(value: Any, memo: dict[int, int]) -> tuple:
    if isinstance(value, types.FunctionType):
        if id(value) in memo:
            return ("ref", memo[id(value)])
        if importable(value):
            return ("import", value.__module__, value.__qualname__)
        index = memo[id(value)] = len(memo)
        cells = []
        for cell in value.__closure__ or ():
            try:
                cells.append(_freeze(cell.cell_contents, memo))
            except ValueError:
                cells.append(("empty",))
        return ("function", index, value.__module__, value.__name__, value.__qualname__,
                marshal.dumps(value.__code__), _freeze(value.__defaults__, memo),
                _freeze(value.__kwdefaults__, memo), cells)
    if isinstance(value, staticmethod | classmethod):
        return (type(value).__name__, _freeze(value.__func__, memo))
    if isinstance(value, property):
        return ("property", [_freeze(f, memo) for f in (value.fget, value.fset, value.fdel)], value.__doc__)
    if isinstance(value, tuple):
        return ("tuple", [_freeze(v, memo) for v in value])
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    try:
        return ("value", dumps(value))
    except Exception as e:  # noqa: BLE001 - whatever does not pickle
        raise CannotFreeze(f"{type(value).__name__}: {e}") from None


def _thaw(frozen: tuple, memo: dict[int, Any]) -> Any:
    kind = frozen[0]
    if kind == "ref":
        return memo[frozen[1]]
    if kind == "import":
        return resolve(frozen[1], frozen[2])
    if kind == "function":
        _, index, module, name, qualname, code, defaults, kwdefaults, cells = frozen
        made = [types.CellType() for _ in cells]
        # A function made by exec() without a module (`__module__` None) gets
        # globals holding only the builtins: whatever else it reads fails in
        # the worker, which then refuses the region.
        scope = importlib.import_module(module).__dict__ if module else {"__builtins__": builtins}
        fn = types.FunctionType(marshal.loads(code), scope, name, None, tuple(made) or None)
        memo[index] = fn
        fn.__qualname__ = qualname
        fn.__defaults__ = _thaw(defaults, memo)
        fn.__kwdefaults__ = _thaw(kwdefaults, memo)
        for cell, content in zip(made, cells):
            if content[0] != "empty":
                cell.cell_contents = _thaw(content, memo)
        return fn
    if kind == "property":
        return property(*(_thaw(f, memo) for f in frozen[1]), frozen[2])
    if kind in ("staticmethod", "classmethod"):
        return (staticmethod if kind == "staticmethod" else classmethod)(_thaw(frozen[1], memo))
    if kind == "tuple":
        return tuple(_thaw(v, memo) for v in frozen[1])
    if kind == "module":
        return importlib.import_module(frozen[1])
    return pickle.loads(frozen[1])


def freeze(value: Any) -> tuple:
    """A value in a form that pickles: a function (plain, static, class
    method, a property's) by name or by code, anything else by pickle;
    CannotFreeze when something it holds does not pickle."""
    return _freeze(value, {})


def thaw(frozen: tuple) -> Any:
    return _thaw(frozen, {})


class Pickler(pickle.Pickler):
    """pickle, with unimportable functions frozen (and thawed on load:
    plain pickle.loads in the worker)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and not importable(obj):
            return thaw, (freeze(obj),)
        if isinstance(obj, type) and not importable(obj):
            ref = class_ref(obj)
            if ref is not None:
                return resolve, ref[1:]
        return NotImplemented


def dumps(value: Any) -> bytes:
    buf = io.BytesIO()
    Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buf.getvalue()
