"""The rank's classes, as the compile worker must see them.

The portable checks (kcache.guards) pin every member of every class of a
block's modules, through their MROs. A rank's classes can differ from what
a fresh process imports: transformers adds `smart_apply` to nn.Module the
first time it initializes a model's weights, a job may patch a method.
The worker never built the model, so a region it compiled would fail
those checks on the rank. So the rank sends, per class of the block, each
member's digest, and the members a fresh import would not reproduce (a
function defined inside another, or one whose module attribute is another
object) frozen: code (marshal: the worker runs the same interpreter),
defaults and closure. The worker installs those, then compares every
digest: a class that still differs is named, and the worker refuses the
region (the rank compiles it itself, as before).
"""

from __future__ import annotations

import importlib
import marshal
import pickle
import types
from typing import Any

import torch

from kcache.guards import describe


class CannotFreeze(Exception):
    pass


def _key(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


def _classes(block: torch.nn.Module) -> list[type]:
    seen: dict[tuple[str, str], type] = {}
    for m in block.modules():
        for c in describe.mro_of(type(m)):
            seen.setdefault(_key(c), c)
    return list(seen.values())


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _importable(fn: types.FunctionType) -> bool:
    if "<locals>" in fn.__qualname__:
        return False
    try:
        return _resolve(fn.__module__, fn.__qualname__) is fn
    except (ImportError, AttributeError, ValueError):
        return False


def _freeze(value: Any, memo: dict[int, int]) -> tuple:
    if isinstance(value, types.FunctionType):
        if id(value) in memo:
            return ("ref", memo[id(value)])
        if _importable(value):
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
    if isinstance(value, tuple):
        return ("tuple", [_freeze(v, memo) for v in value])
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    try:
        return ("value", pickle.dumps(value))
    except Exception as e:  # noqa: BLE001 - whatever does not pickle
        raise CannotFreeze(f"{type(value).__name__}: {e}") from None


def _thaw(frozen: tuple, memo: dict[int, Any]) -> Any:
    kind = frozen[0]
    if kind == "ref":
        return memo[frozen[1]]
    if kind == "import":
        return _resolve(frozen[1], frozen[2])
    if kind == "function":
        _, index, module, name, qualname, code, defaults, kwdefaults, cells = frozen
        made = [types.CellType() for _ in cells]
        fn = types.FunctionType(marshal.loads(code), importlib.import_module(module).__dict__, name,
                                None, tuple(made) or None)
        memo[index] = fn
        fn.__qualname__ = qualname
        fn.__defaults__ = _thaw(defaults, memo)
        fn.__kwdefaults__ = _thaw(kwdefaults, memo)
        for cell, content in zip(made, cells):
            if content[0] != "empty":
                cell.cell_contents = _thaw(content, memo)
        return fn
    if kind in ("staticmethod", "classmethod"):
        return (staticmethod if kind == "staticmethod" else classmethod)(_thaw(frozen[1], memo))
    if kind == "tuple":
        return tuple(_thaw(v, memo) for v in frozen[1])
    if kind == "module":
        return importlib.import_module(frozen[1])
    return pickle.loads(frozen[1])


def capture(block: torch.nn.Module) -> dict:
    """{class key: {member: (digest, frozen member or None)}} for every
    class of the block's modules (their MROs)."""
    out = {}
    for cls in _classes(block):
        members = {}
        for name, digest in describe.member_digests(cls).items():
            value = vars(cls)[name]
            frozen = None
            inner = value.__func__ if isinstance(value, staticmethod | classmethod) else value
            if isinstance(inner, types.FunctionType) and not _importable(inner):
                try:
                    frozen = _freeze(value, {})
                except CannotFreeze:
                    frozen = None
            members[name] = (digest, frozen)
        out[_key(cls)] = members
    return out


def apply(block: torch.nn.Module, state: dict) -> list[str]:
    """Installs the rank's members that differ here and can be; the
    members that still differ ("module.Class.member"), none when the
    classes agree. (Installed first, compared after: one class's member
    can describe another class.)"""
    classes = _classes(block)
    for cls in classes:
        have = describe.member_digests(cls)
        for name, (digest, frozen) in state.get(_key(cls), {}).items():
            if have.get(name) != digest and frozen is not None:
                setattr(cls, name, _thaw(frozen, {}))
    differ = []
    for cls in classes:
        want = state.get(_key(cls))
        if want is None:
            differ.append(f"{cls.__module__}.{cls.__qualname__} (not in the rank's block)")
            continue
        have = describe.member_digests(cls)
        for name in sorted(set(want) | set(have)):
            if have.get(name) != (want.get(name) or (None,))[0]:
                differ.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    return differ
