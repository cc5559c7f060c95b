"""Every guard Dynamo builds for a precompiled region, translated into a
check that means the same in another process (issue 32; docs/precompiled.md
"Guards").

PyTorch's serialized guards for aot_compile drop identity guards (functions,
classes, modules, closures, dict versions) and rebuild the global guards
they keep from the loading process's own values, so they cannot tell one
process's model from another's. kcache's guard filter sees every guard
Dynamo built (GuardFilterEntry), and for each one GUARD_TABLE says what
happens:

- "pytorch": kept by PyTorch and evaluated on the live arguments or the
  global state with the compile-time value (tensors, shapes, grad mode);
- a check kind: kcache records the guard's source as a path of plain steps
  and a portable description (kcache.guards.describe) of what it read when it was
  compiled; the warm process resolves the path on its live objects and
  compares (kcache.guards.portable_checks) before the region is used;
- "traced": no portable check exists; the region takes the traced path.

A guard type missing from the table, a source kcache cannot turn into a
path, or a path that does not lead back to the guarded object raises
NoPortableCheck with the reason: the variant then carries a trace check
instead (one Dynamo trace per variant and process, trace_capture.py).
tests/python/compile/test_guard_table.py fails when torch builds a guard type the
table does not list.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

import torch


_PYTORCH = "pytorch"
_TRACED = "trace"  # no portable check: a trace check (trace_capture.py)

# guard type -> what kcache does with it, for the guard types every supported
# release builds; a release's own additions are in releases/v*.py
# (docs/precompiled.md lists them all).
BASE_GUARD_TABLE: dict[str, str] = {
    # Tensors, shapes and global state: PyTorch keeps these, with the
    # compile-time values, and checks them against the live arguments.
    "TENSOR_MATCH": "tensor", "TENSOR_SUBCLASS_METADATA_MATCH": _PYTORCH,
    "DTENSOR_SPEC_MATCH": _PYTORCH, "DUPLICATE_INPUT": _PYTORCH, "SHAPE_ENV": _PYTORCH,
    "GRAD_MODE": _PYTORCH, "GLOBAL_STATE": _PYTORCH, "DETERMINISTIC_ALGORITHMS": _PYTORCH,
    "TORCH_FUNCTION_STATE": _PYTORCH, "DEFAULT_DEVICE": _PYTORCH,
    "AUTOGRAD_SAVED_TENSORS_HOOKS": _PYTORCH, "DUAL_LEVEL": _PYTORCH,
    "FUNCTORCH_STACK_MATCH": _PYTORCH, "DISPATCH_KEY_SET_MATCH": _PYTORCH,
    # Plain values: the value recorded at compile time.
    "CONSTANT_MATCH": "value", "EQUALS_MATCH": "value", "BOOL_MATCH": "value",
    "NONE_MATCH": "value", "NOT_NONE_MATCH": "value", "CONSTANT_SUBCLASS_MATCH": "value",
    # Identity guards: the object's portable description.
    "ID_MATCH": "object", "FUNCTION_MATCH": "object", "CLOSURE_MATCH": "object",
    "BUILTIN_MATCH": "object", "CLASS_MATCH": "object", "MODULE_MATCH": "object",
    "NN_MODULE": "object", "TYPE_MATCH": "type",
    # Shapes of containers and of objects.
    "SEQUENCE_LENGTH": "length", "TUPLE_ITERATOR_LEN": "length",
    "DICT_KEYS_MATCH": "keys", "MAPPING_KEYS_CHECK": "keys", "DICT_VERSION": "object",
    "DICT_CONTAINS": "contains", "DICT_NOT_CONTAINS": "contains", "SET_CONTAINS": "contains",
    "SET_NOT_CONTAINS": "contains", "HASATTR": "hasattr",
    "NOT_PRESENT_IN_GENERIC_DICT": "in_dict", "EMPTY_NN_MODULE_HOOKS_DICT": "length",
    # No portable meaning (a live weak reference, FSDP's per-step state, a
    # partly consumed iterator, a TorchScript object): a trace check.
    "WEAKREF_ALIVE": _TRACED, "FSDP_TRAINING_STATE": _TRACED, "RANGE_ITERATOR_MATCH": _TRACED,
    "COUNT_ITERATOR_MATCH": _TRACED, "FAKE_SCRIPT_TYPE_MATCH": _TRACED,
    "OPAQUE_OBJ_GUARD_FN_MATCH": _TRACED,
}


def _release_rows() -> dict[str, str]:
    from . import releases

    facts = releases.facts(torch.__version__) or releases.newest()
    return facts.GUARD_ROWS


def every_release_rows() -> dict[str, str]:
    """The table's rows over all supported releases (what the docs list)."""
    from . import releases

    out = dict(BASE_GUARD_TABLE)
    for facts in releases.every():
        out.update(facts.GUARD_ROWS)
    return out


# The table for the torch in this process.
GUARD_TABLE: dict[str, str] = {**BASE_GUARD_TABLE, **_release_rows()}

# Dynamo source classes that name the same object as their base.
_SAME_AS_BASE = frozenset({"UnspecializedNNModuleSource", "UnspecializedBuiltinNNModuleSource",
                           "NNModuleSource", "FSDPNNModuleSource", "NotNNModuleSource"})
# Sources that read an attribute (`member`) of their base.
_ATTR = frozenset({"AttrSource", "UnspecializedParamBufferSource", "CellContentsSource"})
_ITEM = frozenset({"DictGetItemSource", "GetItemSource", "ODictGetItemSource"})
_SIMPLE = {"TypeSource": "type", "TypeDictSource": "typedict", "TypeMROSource": "mro",
           "ClosureSource": "closure"}
_KNOWN_CHAINED = _SAME_AS_BASE | _ATTR | _ITEM | set(_SIMPLE) | {"DefaultsSource"}


class NoPortableCheck(Exception):
    """This guard cannot be checked in another process."""


def source_path(source: Any, f_globals: dict[str, Any]) -> list[list[Any]]:
    """A Dynamo Source as plain steps from a local or a module, e.g.
    [["local", "block"], ["attr", "_modules"], ["item", "sub"]]."""
    kind = type(source).__name__
    if kind == "LocalSource":
        return [["local", source.local_name]]
    if kind == "GlobalSource":
        value = f_globals.get(source.global_name, f_globals.get("__builtins__"))
        name = source.global_name
        if name.startswith("__import_") and hasattr(value, "__name__") and value.__name__ in sys.modules:
            return [["module", value.__name__]]
        if name in f_globals and isinstance(f_globals[name], type(sys)):
            return [["module", f_globals[name].__name__]]
        if name.startswith("__builtins_dict__") and f_globals.get(name) is builtins.__dict__:
            return [["module", "builtins"], ["vars"]]
        raise NoPortableCheck(f"global {name!r} of kcache's own entry function")
    if kind not in _KNOWN_CHAINED:
        raise NoPortableCheck(f"source {kind}")
    if kind in _SAME_AS_BASE:
        return source_path(source.base, f_globals)
    base = source_path(source.base, f_globals)
    if kind in _ATTR:
        return base + [["attr", source.member]]
    if kind in _ITEM:
        index = source.index
        if getattr(source, "index_is_slice", False) or not isinstance(index, str | int | bool | type(None)):
            raise NoPortableCheck(f"{kind} with index {type(index).__name__}")
        return base + [["item", index]]
    if kind in _SIMPLE:
        return base + [[_SIMPLE[kind]]]
    if kind == "DefaultsSource":
        return base + [["kwdefault" if source.is_kw else "default", source.idx_key]]
    raise NoPortableCheck(f"source {kind}")


def _partial_args(guard: Any) -> dict[str, Any]:
    fn = guard.create_fn
    out = dict(getattr(fn, "keywords", None) or {})
    for i, a in enumerate(getattr(fn, "args", ()) or ()):
        out[f"arg{i}"] = a
    return out


def portable_checks(entries: list[Any], f_globals: dict[str, Any], f_locals: dict[str, Any],
                    resolve, expected) -> list[dict[str, Any]]:
    """One check per distinct guard that needs one; raises NoPortableCheck
    (with the guard in words) for a guard that has none."""
    checks: dict[tuple, dict[str, Any]] = {}
    memo: dict = {}
    for e in entries:
        action = GUARD_TABLE.get(e.guard_type)
        if action is None:
            raise NoPortableCheck(f"guard type {e.guard_type} is not in kcache's guard table")
        if action == _TRACED:
            raise NoPortableCheck(f"{e.guard_type} on {e.orig_guard.name}")
        source = getattr(e.orig_guard, "originating_source", None)
        if action == _PYTORCH or type(source).__name__ in ("GlobalStateSource", "ShapeEnvSource"):
            continue
        if action == "tensor" and not e.is_global:
            continue  # an argument or a parameter: PyTorch's own guard, on the live tensor
        path = source_path(source, f_globals)
        args = _partial_args(e.orig_guard)
        arg = args.get("attr", args.get("key", args.get("arg0")))
        if not isinstance(arg, str | int | bool | type(None)):
            raise NoPortableCheck(f"{e.guard_type} on {e.orig_guard.name} with a {type(arg).__name__}")
        key = (repr(path), action, repr(arg))
        if key in checks:
            continue
        try:
            value = resolve(path, f_locals)
        except Exception as err:  # noqa: BLE001 - a path kcache cannot follow
            raise NoPortableCheck(f"{e.orig_guard.name} does not resolve ({type(err).__name__})") from err
        if e.has_value and value is not e.value and not _same_plain(value, e.value):
            raise NoPortableCheck(f"path of {e.orig_guard.name} does not lead back to its object")
        try:
            want = expected(action, value, arg, memo)
        except (TypeError, ValueError) as err:
            raise NoPortableCheck(f"{e.guard_type} on {e.orig_guard.name}: {err}") from err
        checks[key] = {"guard": e.guard_type, "source": e.orig_guard.name, "path": path,
                       "kind": action, "arg": arg, "want": want}
    return list(checks.values())


def _same_plain(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - a comparison that does not give a bool
        return False


def _is_local_class(value: Any) -> bool:
    cls = value if isinstance(value, type) else type(value)
    return "<locals>" in getattr(cls, "__qualname__", "")


def through_local_classes(entries: list[Any], f_globals: dict[str, Any], f_locals: dict[str, Any],
                          resolve) -> list[bool]:
    """For each guard, whether its source reads through a class defined in a
    function's scope (or an instance of one): PyTorch cannot serialize such
    an object, and its serialized guards on anything reached through it do
    not rebuild in another process (transformers 5's `kernels` wrappers)."""
    memo: dict[str, bool] = {}
    out = []
    for e in entries:
        try:
            path = source_path(getattr(e.orig_guard, "originating_source", None), f_globals)
        except NoPortableCheck:
            out.append(False)
            continue
        found = False
        for i in range(1, len(path) + 1):
            key = repr(path[:i])
            if key not in memo:
                try:
                    memo[key] = _is_local_class(resolve(path[:i], f_locals))
                except Exception:  # noqa: BLE001 - a path kcache cannot follow: not a reason
                    memo[key] = False
            if memo[key]:
                found = True
                break
        out.append(found)
    return out


def needs_pytorch(entry: Any) -> bool:
    """Whether only PyTorch's own guard checks this entry (kcache records no
    portable check for it)."""
    action = GUARD_TABLE.get(entry.guard_type)
    source = getattr(entry.orig_guard, "originating_source", None)
    return (action == _PYTORCH or type(source).__name__ in ("GlobalStateSource", "ShapeEnvSource")
            or (action == "tensor" and not entry.is_global))
