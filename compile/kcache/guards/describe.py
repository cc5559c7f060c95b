"""Descriptions of Python objects that mean the same in another process.

A precompiled region was compiled in one process and runs in another
(docs/precompiled.md). Dynamo's identity guards (this function object, this
class, this module) are meaningless there, so kcache records, for every
object a guard was about, a description built from what decides what the
object computes, and compares it with the live object's description before
the region is used (kcache.guards.portable_checks):

- a function: its module, qualname, a hash of its code object (bytecode,
  constants, names, nested code), its defaults and its closure cells;
- a class: module and qualname, and for every class in its MRO the
  description of each member of its __dict__ (methods, properties, static
  and class methods, plain class attributes), so that a method replaced at
  run time on the class, a base class or a submodule's class differs;
- a module: its name; a bound method: its function and its owner's class;
- a partial: its function, arguments and keywords;
- an nn.Module or other object: its class (its attributes that the region
  reads have guards of their own);
- a tensor: its metadata (values are graph inputs, read at run time);
- plain values, containers: their values.

Descriptions are nested lists of strings (JSON as stored in a bundle), with
no addresses and no set or hash ordering in them; recursion stops at a
fixed depth with the type's name.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import types
from typing import Any

import torch

_MAX_DEPTH = 4
_MAX_ITEMS = 64
# Class-dict entries that say nothing about what the class computes.
_SKIP_MEMBERS = frozenset({"__dict__", "__weakref__", "__doc__", "__module__", "__qualname__",
                           "__annotations__", "__orig_bases__", "__parameters__", "_abc_impl",
                           "__firstlineno__", "__static_attributes__", "__slotnames__",
                           "__abstractmethods__", "__type_params__",
                           # set on nn.Module by Dynamo's first compile in a process
                           "___needs_generation_tag_patch"})
_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_TORCH_PLAIN = (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size)
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE
_code_memo: dict[int, tuple[types.CodeType, str]] = {}


def code_digest(code: types.CodeType) -> str:
    """sha256 of what a code object executes: bytecode, constants (nested
    code by digest), names, argument layout and flags; not its file name or
    line numbers (a moved function computes the same)."""
    memo = _code_memo.get(id(code))
    if memo is not None and memo[0] is code:
        return memo[1]
    h = hashlib.sha256()
    for part in (code.co_code, repr(code.co_names), repr(code.co_varnames), repr(code.co_freevars),
                 repr(code.co_cellvars), repr((code.co_argcount, code.co_posonlyargcount,
                                               code.co_kwonlyargcount, code.co_flags))):
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\0")
    for const in code.co_consts:
        h.update(_const_text(const).encode())
        h.update(b"\0")
    digest = h.hexdigest()
    _code_memo[id(code)] = (code, digest)
    return digest


def _const_text(const: Any) -> str:
    if isinstance(const, types.CodeType):
        return "code:" + code_digest(const)
    if isinstance(const, frozenset):
        return "frozenset:" + repr(sorted(_const_text(c) for c in const))
    if isinstance(const, tuple):
        return "tuple:" + repr([_const_text(c) for c in const])
    return f"{type(const).__name__}:{const!r}"


def _name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def describe(obj: Any, depth: int = 0, memo: dict | None = None) -> Any:
    """The portable description of `obj` (see the module docstring)."""
    memo = {} if memo is None else memo
    if isinstance(obj, _PLAIN):
        return [type(obj).__name__, repr(obj)]
    if isinstance(obj, enum.Enum):
        return ["enum", _name(type(obj)), obj.name]
    if isinstance(obj, _TORCH_PLAIN):
        return [type(obj).__name__, str(obj)]
    if depth >= _MAX_DEPTH:
        return ["deep", _name(type(obj))]
    if isinstance(obj, type):
        return describe_class(obj, depth, memo)
    if isinstance(obj, types.ModuleType):
        return ["module", obj.__name__]
    if isinstance(obj, types.FunctionType):
        return _describe_function(obj, depth, memo)
    if isinstance(obj, types.MethodType):
        owner = obj.__self__
        return ["method", describe(obj.__func__, depth + 1, memo),
                describe(owner, depth + 1, memo) if isinstance(owner, type | types.ModuleType)
                else describe_class(type(owner), depth + 1, memo)]
    if isinstance(obj, functools.partial):
        return ["partial", describe(obj.func, depth + 1, memo), describe(obj.args, depth + 1, memo),
                describe(obj.keywords, depth + 1, memo)]
    if isinstance(obj, types.BuiltinFunctionType | types.BuiltinMethodType | types.WrapperDescriptorType
                  | types.MethodWrapperType | types.MethodDescriptorType | types.ClassMethodDescriptorType):
        owner = getattr(obj, "__self__", None)
        where = (owner.__name__ if isinstance(owner, types.ModuleType) else
                 _name(owner) if isinstance(owner, type) else
                 _name(type(owner)) if owner is not None else str(getattr(obj, "__module__", None)))
        return ["builtin", where, getattr(obj, "__qualname__", getattr(obj, "__name__", "?"))]
    if isinstance(obj, torch.Tensor):
        return ["tensor", _name(type(obj)), str(obj.dtype), repr(tuple(obj.shape)),
                repr(obj.stride()), obj.device.type, repr(obj.requires_grad)]
    from kcache import _torch_adaptor as adaptor  # here: the adaptor imports this module

    if adaptor.is_aten_op(obj):
        return ["op", str(obj)]
    if isinstance(obj, list | tuple):
        return _describe_sequence(obj, depth, memo)
    if isinstance(obj, dict | types.MappingProxyType):
        items = list(obj.items())
        if len(items) > _MAX_ITEMS:
            return [type(obj).__name__, "len", str(len(items))]
        return [type(obj).__name__, [[repr(k) if isinstance(k, _PLAIN) else _name(type(k)),
                                      describe(v, depth + 1, memo)] for k, v in items]]
    if isinstance(obj, set | frozenset):
        return [type(obj).__name__, sorted(repr(x) for x in obj)[:_MAX_ITEMS]]
    if isinstance(obj, property):
        return ["property"] + [describe(f, depth + 1, memo) for f in (obj.fget, obj.fset, obj.fdel)]
    if isinstance(obj, staticmethod | classmethod):
        return [type(obj).__name__, describe(obj.__func__, depth + 1, memo)]
    return ["object", describe_class(type(obj), depth + 1, memo)]


def _describe_sequence(obj: list | tuple, depth: int, memo: dict) -> list:
    if len(obj) > _MAX_ITEMS:
        return [type(obj).__name__, "len", str(len(obj))]
    return [type(obj).__name__, [describe(x, depth + 1, memo) for x in obj]]


# Wrappers PyTorch itself installs on a process's first compile (Dynamo's
# generation tagging wraps nn.Module.__init__ and __setstate__): described
# as the function they wrap, so that a process that has compiled and one
# that has not describe nn.Module alike.
_TRANSPARENT_WRAPPERS = frozenset({"torch._dynamo.mutation_guard"})


def _unwrapped(fn: types.FunctionType) -> types.FunctionType:
    while fn.__module__ in _TRANSPARENT_WRAPPERS:
        inner = [c.cell_contents for c in fn.__closure__ or ()
                 if isinstance(c.cell_contents, types.FunctionType)]
        if not inner:
            break
        fn = inner[0]
    return fn


def _describe_function(fn: types.FunctionType, depth: int, memo: dict) -> list:
    fn = _unwrapped(fn)
    cells = []
    for cell in fn.__closure__ or ():
        try:
            cells.append(describe(cell.cell_contents, depth + 1, memo))
        except ValueError:  # an empty cell
            cells.append(["empty"])
    return ["function", str(fn.__module__), fn.__qualname__, code_digest(fn.__code__),
            describe(fn.__defaults__, depth + 1, memo), describe(fn.__kwdefaults__, depth + 1, memo),
            cells]


def describe_class(cls: type, depth: int = 0, memo: dict | None = None) -> list:
    """Module and qualname, and per class of its MRO a digest of its members.

    A class defined in C with an immutable type (dict, OrderedDict, Tensor's
    C base) cannot have its members replaced: its name says it all."""
    memo = {} if memo is None else memo
    hit = memo.get((cls, depth))
    if hit is not None:
        return hit
    memo[(cls, depth)] = ["class", _name(cls), "recursive"]  # a class whose member is itself
    try:
        mro = []
        for c in cls.__mro__:
            if c is object or c.__flags__ & _IMMUTABLE_TYPE:
                continue
            if depth >= _MAX_DEPTH:
                mro.append([_name(c), "deep"])
                continue
            members = [[name, describe(value, depth + 1, memo)] for name, value in sorted(vars(c).items())
                       if name not in _SKIP_MEMBERS]
            mro.append([_name(c), digest(members)])
    except BaseException:
        # the placeholder must not outlive this call (a memo may be the
        # process's: kcache/guards/class_memo.py)
        abandon = getattr(memo, "abandon", None)
        if abandon is not None:
            abandon((cls, depth))
        else:
            memo.pop((cls, depth), None)
        raise
    out = ["class", _name(cls), mro]
    memo[(cls, depth)] = out
    return out


def member_digests(cls: type) -> dict[str, str]:
    """A digest per member of one class (not its bases), as describe_class
    sees them: kcache.background.class_state compares a compile worker's
    classes with the rank's by these."""
    return {name: digest(describe(value, 1, {})) for name, value in sorted(vars(cls).items())
            if name not in _SKIP_MEMBERS}


def mro_of(cls: type) -> list[type]:
    """The classes of cls's MRO whose members describe_class reads."""
    return [c for c in cls.__mro__ if c is not object and not c.__flags__ & _IMMUTABLE_TYPE]


def digest(desc: Any) -> str:
    """sha256 of a description's canonical JSON."""
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()
