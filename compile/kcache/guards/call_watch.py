"""Every call, not only the first: what a precompiled block's checks read,
watched cheaply so that a change after the first call is seen.

A block's portable checks (kcache.guards.portable_checks) resolve paths on live
objects — its class and bases and their members, its submodules' classes,
functions held in attributes, module globals and the dicts an inlined
function read — and run once per block and call signature. After they
pass, `collect` records the dicts those paths read from (class dicts, module
globals, instance dicts, registries) with their version tags, the objects
whose class a check pinned, and the parts of functions that live outside
any dict (code, defaults, closure cells). `Watch.unchanged()` compares them
on every call: one C call per dict (PyTorch's dict_version, as Dynamo's
DICT_VERSION guards) and an identity test per pinned object.

When a tag moved, `Watch.still_valid()` looks closer before anything is
redone: in a dict read by key (module globals, an instance's __dict__),
only a change to a key a check read, or to an instance key that shadows a
class member, counts; any write to a dict read whole (a class's members, a
registry described by value) counts. A change that counts sends the block
back through the first call's path (kcache.precompiled: the checks again,
then the same or another stored variant, a compile, or the traced path).

Not seen (docs/precompiled.md "Every call"): in-place changes to objects
that have no version tag and that a check reads below the first level (a
list's items, an object reached through a closure cell or a default
argument after the check's path ends), and `__code__` replaced on a
function a class member refers to indirectly. Dynamo's own guards kept in
the stored function (checked on every call as before) cover constants and
tensors.
"""

from __future__ import annotations

import builtins
import gc
import importlib
import sys
import types
import weakref
from typing import Any

import torch

from kcache import _torch_adaptor as adaptor

_MISSING = object()
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE
_BUILTIN_NAMES = frozenset(vars(builtins))


def class_dict(cls: type) -> dict:
    """The dict behind `cls.__dict__` (a read-only proxy of it)."""
    return gc.get_referents(cls.__dict__)[0]


class Watch:
    """What one block's checks read, under one call signature."""

    __slots__ = ("dicts", "versions", "labels", "keyed", "snaps", "pinned", "parts", "funcs", "lists",
                 "trace_guard", "guard_failed", "_index", "_classes", "_shared")

    def __init__(self, trace_guard: Any = None) -> None:
        # A variant with guards that have no portable check: the guards of
        # this process's trace of it (kcache.precompiled's trace check),
        # checked on every call too.
        self.trace_guard = trace_guard
        self.guard_failed = False
        self.dicts: list[dict] = []
        self._index: dict[int, int] = {}  # id(dict) -> its index in dicts, while collecting
        self._classes: set[int] = set()  # classes whose MRO is already in dicts
        self._shared: set[int] = set()  # ids of class dicts and module globals (long-lived, shared)
        self.versions: tuple = ()
        # what each dict is, in words: a str, or (template, name) formatted
        # when said (most dicts are met many times, said at most once)
        self.labels: list = []
        # index in dicts -> (keys read, names it may shadow) for dicts read
        # by key; absent for dicts read whole
        self.keyed: dict[int, tuple[set, frozenset]] = {}
        # per dict: its items when sealed (the objects, not their ids: a
        # freed object's id can be reused by the one that replaced it)
        self.snaps: list[dict] = []
        self.pinned: list[tuple[Any, type]] = []  # (object, the class a check pinned)
        self.parts: list[tuple[Any, tuple]] = []  # (function or list, its parts: _parts)

    # ---------------------------------------------------------- recording

    def _dict(self, d: dict, label: Any, key: Any = _MISSING, shadows: Any = frozenset()) -> None:
        """A dict a check read: whole, or by `key` (`shadows`: the names an
        instance key may shadow, or the class whose member names they are)."""
        i = self._index.get(id(d))
        if i is None:
            i = self._index[id(d)] = len(self.dicts)
            self.dicts.append(d)
            self.labels.append(label)
            if key is not _MISSING:
                self.keyed[i] = (set(), _member_names(shadows) if isinstance(shadows, type) else shadows)
        entry = self.keyed.get(i)
        if entry is None:
            return
        if key is _MISSING:
            del self.keyed[i]  # read whole after all
        else:
            entry[0].add(key)

    def _class(self, cls: type) -> None:
        if id(cls) in self._classes:
            return
        self._classes.add(id(cls))
        for c in cls.__mro__:
            # A class defined in C with an immutable type (dict, OrderedDict,
            # builtin functions) cannot change: nothing to watch.
            if c is not object and not c.__flags__ & _IMMUTABLE_TYPE:
                d = class_dict(c)
                self._shared.add(id(d))
                self._dict(d, ("the members of {}", c))

    def _instance(self, obj: Any, name: Any) -> None:
        """An attribute `name` read on `obj` (not a class or module)."""
        cls = type(obj)
        self._class(cls)
        if isinstance(getattr(obj, "__dict__", None), dict):
            self._dict(obj.__dict__, ("the attributes of a {}", cls), name, cls)
        if isinstance(obj, torch.nn.Module):
            # Submodules by name; a parameter or buffer only where a check
            # read one (the compiled function takes them from the block on
            # every call: replacing one is not a change of code).
            for part in ("_modules", "_parameters", "_buffers"):
                d = obj.__dict__[part]
                if part == "_modules" or name in d:
                    self._dict(d, ("the " + part[1:] + " of a {}", cls), name)

    def _value(self, value: Any, kind: str, arg: Any) -> None:
        """What a check of `kind` described of its resolved value."""
        if kind == "type":
            self.pinned.append((value, type(value)))
            self._class(type(value))
        elif kind in ("keys", "length", "contains") and isinstance(value, dict):
            self._dict(value, "a dict a check reads")
        elif kind == "in_dict" and isinstance(getattr(value, "__dict__", None), dict):
            self._dict(value.__dict__, ("the attributes of a {}", type(value)))
        elif kind == "hasattr":
            self._attr(value, arg)
        elif kind in ("value", "object"):
            self._described(value, 0)
        if isinstance(value, list):
            self.parts.append((value, tuple(value)))

    def _described(self, value: Any, depth: int) -> None:
        if depth > 2:
            return
        if isinstance(value, type):
            self._class(value)
        elif isinstance(value, types.FunctionType):
            self.parts.append((value, _function_parts(value)))
            for cell in value.__closure__ or ():
                try:
                    self._described(cell.cell_contents, depth + 1)
                except ValueError:
                    pass
        elif isinstance(value, types.MethodType):
            self._described(value.__func__, depth + 1)
            self._described(value.__self__ if isinstance(value.__self__, type) else type(value.__self__),
                            depth + 1)
        elif isinstance(value, dict):
            self._dict(value, "a dict a check read")
        elif isinstance(value, types.ModuleType):
            pass
        elif not isinstance(value, (int, float, str, bool, bytes, type(None), tuple, torch.Tensor)):
            self._class(type(value))
            if isinstance(getattr(value, "__dict__", None), dict):
                self._dict(value.__dict__, ("the attributes of a {}", type(value)))

    def _attr(self, obj: Any, name: str) -> None:
        if isinstance(obj, type):
            self._class(obj)
        elif isinstance(obj, types.ModuleType):
            self._shared.add(id(obj.__dict__))
            self._dict(obj.__dict__, ("the globals of {}", obj), name, _BUILTIN_NAMES)
        else:
            self._instance(obj, name)

    def seal(self) -> "Watch":
        # One entry per object: many checks pin the same block or function.
        self.pinned = list({id(o): (o, c) for o, c in self.pinned}.values())
        self.parts = list({id(o): (o, s) for o, s in self.parts}.values())
        self.funcs = [(o, *s[:3], s[3]) for o, s in self.parts if isinstance(o, types.FunctionType)]
        self.lists = [(o, s) for o, s in self.parts if not isinstance(o, types.FunctionType)]
        self._index, self._classes = {}, set()  # collection only; _shared stays for refreshes
        self.versions = tuple(map(adaptor.dict_version, self.dicts))
        # Class dicts and globals: one copy shared by the blocks of a region
        # (a module-level cache would keep a freed model's instance dicts,
        # and their tensors, alive: those are copied per watch).
        self.snaps = [_snapshot(d, v) if id(d) in self._shared else dict(d)
                      for d, v in zip(self.dicts, self.versions)]
        return self

    # ---------------------------------------------------------- every call

    def unchanged(self, block: torch.nn.Module, args: tuple, kwargs: dict) -> bool:
        """The fast test, on every call."""
        if tuple(map(adaptor.dict_version, self.dicts)) != self.versions:
            return False
        if self.trace_guard is not None and not self.trace_guard.check(
                {"block": block, "args": args, "kwargs": kwargs}):
            self.guard_failed = True
            return False
        for obj, cls in self.pinned:
            if type(obj) is not cls:
                return False
        try:
            for fn, code, defaults, kwdefaults, cells in self.funcs:
                if fn.__code__ is not code or fn.__defaults__ is not defaults or fn.__kwdefaults__ is not kwdefaults:
                    return False
                for cell, content in cells:
                    if cell.cell_contents is not content:
                        return False
        except ValueError:  # a cell emptied
            return False
        for lst, items in self.lists:
            if len(lst) != len(items) or any(a is not b for a, b in zip(lst, items)):
                return False
        return True

    def still_valid(self) -> str | None:
        """After unchanged() said no: None when nothing a check read
        changed (the new tags are kept), else what changed, in words."""
        if self.guard_failed:
            return "a guard of this process's trace of the region"
        for obj, cls in self.pinned:
            if type(obj) is not cls:
                return f"the class of an object a check pinned ({cls.__qualname__} -> {type(obj).__qualname__})"
        for obj, parts in self.parts:
            if not _same(_parts(obj), parts):
                return f"{getattr(obj, '__qualname__', type(obj).__qualname__)} changed in place"
        now = tuple(map(adaptor.dict_version, self.dicts))
        moved = []
        for i, (d, was, is_) in enumerate(zip(self.dicts, self.versions, now)):
            if was == is_:
                continue
            moved.append(i)
            # A tag also moves when a key is written with the object it held
            # (a patch undone): only keys whose object changed count.
            snap = self.snaps[i]
            changed = {k for k in snap.keys() | d.keys() if not _same_value(snap.get(k, _MISSING), d.get(k, _MISSING))}
            entry = self.keyed.get(i)
            if entry is not None:
                read, shadows = entry
                changed = {k for k in changed if k in read or k in shadows}
            if changed:
                return f"{_label(self.labels[i])} ({', '.join(sorted(map(str, changed))[:4])})"
        # Nothing a check read: keep the new tags, and copies of the moved
        # dicts only (a dict written on every call costs one copy per call).
        self.versions = now
        for i in moved:
            d = self.dicts[i]
            self.snaps[i] = _snapshot(d, now[i]) if id(d) in self._shared else dict(d)
        return None


_PLAIN = (int, float, str, bool, bytes, type(None))


def _label(label: Any) -> str:
    """A dict's label in words: (template, a class, module or text)."""
    if isinstance(label, str):
        return label
    template, what = label
    if isinstance(what, type):
        what = what.__qualname__ if template.endswith("of a {}") else f"{what.__module__}.{what.__qualname__}"
    elif isinstance(what, types.ModuleType):
        what = what.__name__
    return template.format(what)


def _same_value(a: Any, b: Any) -> bool:
    """The same object, or equal plain values (a module writing
    `self.shape = tuple(x.shape)` on every call changes nothing a check,
    which describes plain values by value, would see)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, _PLAIN):
        return a == b
    if type(a) is tuple:
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return False


_MEMBER_NAMES: "weakref.WeakKeyDictionary[type, frozenset]" = weakref.WeakKeyDictionary()
# id(dict) -> (the dict, its version, a copy of it then): blocks of a region
# share their class dicts and globals, so one copy serves all their watches
# (the copies are only read).
_SNAPSHOTS: dict[int, tuple[dict, int, dict]] = {}


def _snapshot(d: dict, version: int) -> dict:
    hit = _SNAPSHOTS.get(id(d))
    if hit is not None and hit[0] is d and hit[1] == version:
        return hit[2]
    snap = dict(d)
    _SNAPSHOTS[id(d)] = (d, version, snap)
    return snap


def _member_names(cls: type) -> frozenset:
    """The names an instance attribute of `cls` would shadow (memoized: a
    class whose members change is watched whole anyway)."""
    names = _MEMBER_NAMES.get(cls)
    if names is None:
        names = _MEMBER_NAMES[cls] = frozenset(n for c in cls.__mro__ for n in vars(c))
    return names


class _Covered(Exception):
    """A check whose object is watched elsewhere."""


def _is_hook_dict(name: Any) -> bool:
    """A module's or torch.nn's hook registry (`_forward_hooks`,
    `_global_backward_hooks`, ...): module_hooks() reads them on every call."""
    return isinstance(name, str) and name.startswith("_") and ("_hooks" in name)


def _function_parts(fn: types.FunctionType) -> tuple:
    """What of a function lives outside any dict: its code, defaults and
    the objects in its (full) closure cells."""
    cells = tuple((c, c.cell_contents) for c in fn.__closure__ or () if _cell_full(c))
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__, cells)


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _parts(obj: Any) -> tuple:
    if isinstance(obj, types.FunctionType):
        try:
            return _function_parts(obj)
        except ValueError:
            return ()
    return tuple(obj)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y or (isinstance(x, tuple) and isinstance(y, tuple) and _same(x, y))
                                    for x, y in zip(a, b))


def collect(checks: list[dict[str, Any]], block: torch.nn.Module, trace_guard: Any = None) -> Watch | None:
    """The watch for a block whose checks just passed; None when it has
    nothing to watch."""
    w = Watch(trace_guard)
    # (id(object), name) -> the object, for reads already recorded: checks
    # share path prefixes (block._modules["attn"]...), and recording a read
    # twice records nothing new. The object is kept so that its id is not
    # reused by another within this collection.
    done: dict[tuple[int, Any], Any] = {}
    for c in checks:
        if c["kind"] == "trace":
            continue
        path = c["path"]
        if path and path[0][0] == "local" and path[0][1] != "block":
            continue  # args and kwargs: the call signature covers them
        try:
            obj: Any = _MISSING
            copy = False  # obj is a copy of a class's members (a "typedict" step): watched whole
            for step in path:
                op = step[0]
                was_copy, copy = copy, False
                if op == "local":
                    obj = block
                elif op == "module":
                    obj = importlib.import_module(step[1])
                elif op == "attr":
                    if _is_hook_dict(step[1]):
                        raise _Covered  # kcache.precompiled checks hooks on every call already
                    if (id(obj), step[1]) not in done:
                        done[id(obj), step[1]] = obj
                        w._attr(obj, step[1])
                    obj = getattr(obj, step[1])
                elif op == "item":
                    if isinstance(obj, dict) and not was_copy and (id(obj), step[1]) not in done:
                        done[id(obj), step[1]] = obj
                        w._dict(obj, ("a dict {} reads", c["source"]), step[1])
                    obj = obj[step[1]]
                elif op == "type":
                    w.pinned.append((obj, type(obj)))
                    obj = type(obj)
                elif op in ("typedict", "mro"):
                    w._class(obj)
                    obj = dict(obj.__dict__) if op == "typedict" else obj.__mro__
                    copy = op == "typedict"
                elif op == "vars":
                    w._dict(vars(obj), ("the attributes of a {}", type(obj)))
                    obj = vars(obj)
                elif op == "closure":
                    w.parts.append((obj, _function_parts(obj)))
                    obj = obj.__closure__
                elif op in ("default", "kwdefault"):
                    w.parts.append((obj, _function_parts(obj)))
                    obj = (obj.__defaults__ if op == "default" else obj.__kwdefaults__)[step[1]]
                else:
                    raise KeyError(op)
            w._value(obj, c["kind"], c.get("arg"))
        except _Covered:
            continue
        except Exception:  # noqa: BLE001 - the check read it a moment ago; nothing to watch here
            continue
    if trace_guard is not None:
        _trace_checked_extras(w, block)
    return w.seal() if (w.dicts or w.pinned or w.parts or trace_guard is not None) else None


def _trace_checked_extras(w: Watch, block: torch.nn.Module) -> None:
    """A variant checked by a trace has no portable checks to follow, and
    the trace's guard manager checks the identity of what the forward
    reached, not the members of its classes (a method replaced on the
    class of a global module, found by the fuzzer). Watched instead: the
    classes and attributes of the block and its submodules, and, one level
    into the globals of each of their modules, every class defined there
    and the class and attributes of every object of such a class. Wider
    than needed (a global written anywhere in those modules rechecks), and
    a recheck traces again (kcache.precompiled)."""
    modules = set()
    for sub in block.modules():
        w._class(type(sub))
        w._dict(sub.__dict__, f"the attributes of a {type(sub).__qualname__}")
        w._dict(sub._modules, f"the modules of a {type(sub).__qualname__}")
        modules.add(type(sub).__module__)
    for name in sorted(modules):
        mod = sys.modules.get(name)
        if mod is None or name.startswith("torch."):
            continue
        w._shared.add(id(mod.__dict__))
        w._dict(mod.__dict__, f"the globals of {name}")
        for value in list(vars(mod).values()):
            cls = value if isinstance(value, type) else type(value)
            if getattr(cls, "__module__", None) != name:
                continue
            w._class(cls)
            if not isinstance(value, type) and isinstance(getattr(value, "__dict__", None), dict):
                w._dict(value.__dict__, f"the attributes of {name}.{cls.__qualname__} object")
