"""Precompiled regions: Dynamo's own output for one block (aot_compile),
serialized, loaded, its guards checked and its constants read.
torch.compile(fn, fullgraph=True).aot_compile(((args), {kwargs})) returns
an AOTCompiledFunction: Dynamo's transformed bytecode, its guards
(serializable ones only: global guards and identity guards are dropped by
PyTorch on this path) and the bundled AOTAutograd entry holding Inductor's
compiled graphs (the backward lowered eagerly). Loading it runs no Dynamo,
no AOTAutograd and no Inductor code generation.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any, Callable

import torch

from . import guard_checks
from .inductor import inductor_config_patches


def required() -> dict[str, bool]:
    import torch._guards
    from torch._dynamo import aot_compile, guards, package, pgo
    from torch._dynamo import types as dynamo_types

    fn_cls = getattr(aot_compile, "AOTCompiledFunction", None)
    return {
        "torch._dynamo.aot_compile.AOTCompiledFunction.serialize/deserialize/guard_check": all(
            hasattr(fn_cls, a) for a in ("serialize", "deserialize", "guard_check", "source_info")),
        "torch._dynamo.aot_compile.CompileArtifacts.source_info": "source_info" in getattr(
            getattr(aot_compile, "CompileArtifacts", None), "__dataclass_fields__", {}),
        "torch._dynamo.package._hash_sourcelines": hasattr(package, "_hash_sourcelines"),
        "torch._dynamo.package.InlinedSource": hasattr(package, "InlinedSource"),
        "torch._dynamo.pgo.get_code_state": hasattr(pgo, "get_code_state"),
        "torch._dynamo.guards.CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES": hasattr(
            guards.CheckFunctionManager, "UNSUPPORTED_SERIALIZATION_GUARD_TYPES"),
        "torch._dynamo.eval_frame.OptimizedModule": hasattr(torch._dynamo.eval_frame, "OptimizedModule"),
        # The portable guard checks (guard_checks.py) read these.
        "torch._dynamo.types.GuardFilterEntry(name, guard_type, is_global, has_value, value, orig_guard)":
        {"name", "guard_type", "is_global", "has_value", "value", "orig_guard"} <= set(
            getattr(getattr(dynamo_types, "GuardFilterEntry", None), "__dataclass_fields__", {})),
        "torch._guards.Guard(originating_source, create_fn)": {"originating_source", "create_fn"} <= set(
            getattr(torch._guards.Guard, "__dataclass_fields__", {})),
        # keep_serializable_guards: a type match on a class defined in a
        # function's scope is marked so (serialize_guards refuses it).
        "torch._guards.Guard._unserializable": "_unserializable" in getattr(
            torch._guards.Guard, "__dataclass_fields__", {}),
    }


def keep_serializable_guards(entries) -> list[bool]:
    """Which guards a precompiled region keeps.

    PyTorch's default on this path drops every global guard. kcache keeps
    those on module attributes reached through Dynamo's import aliases
    (G['__import_<module>'].<name>: every global the block's code reads,
    since the traced root is kcache's own `call`), so that a module-level
    flag read in forward is still checked on every call. It drops what
    cannot be serialized (identity, function and closure matches, dict
    versions) and builtins (their alias is not rebuilt on load).

    It also drops a type match on a class defined in a function's scope
    (PyTorch marks it unserializable and would refuse the whole region):
    kcache's own portable "type" check (guard_checks.py) compares that
    class's description at the same path in the warm process, so nothing is
    lost. transformers 5 meets this on every Llama-like block: the `kernels`
    package turns apply_rotary_pos_emb into an instance of a local class.
    """
    from torch._dynamo.guards import CheckFunctionManager

    unsupported = CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES
    return [g.guard_type not in unsupported and not _local_type_match(g)
            and (not g.is_global or g.name.startswith("G['__import_")) for g in entries]


def _local_type_match(entry) -> bool:
    return (entry.guard_type in ("TYPE_MATCH", "BUILTIN_MATCH")
            and getattr(entry.orig_guard, "_unserializable", False))


def _drop_through_local_classes(entries, keep: list[bool], f_globals, f_locals, failed: list[str],
                                resolve) -> list[bool]:
    """PyTorch's serialized guards that read through a class defined in a
    function's scope do not rebuild on load (the object does not pickle):
    they are dropped, and kcache's own portable check of the same path
    stands in. A guard only PyTorch checks (a tensor's, a global state's)
    cannot be dropped so: it makes the region need a trace check."""
    local = guard_checks.through_local_classes(entries, f_globals, f_locals, resolve)
    for e, through in zip(entries, local):
        if through and guard_checks.needs_pytorch(e):
            failed.append(f"{e.guard_type} on {e.orig_guard.name} reads through a class defined "
                          "in a function's scope, which PyTorch's guards cannot rebuild")
            break
    return [k and not through for k, through in zip(keep, local)]


class PrecompileUnsupported(RuntimeError):
    """Dynamo cannot produce a serializable function for this region (a graph
    break, a guard or global that does not serialize, an unsupported construct)."""


def aot_compile_call(call, args: tuple, kwargs: dict, mode: str | None,
                     options: dict[str, Any] | None, dynamic: bool | None,
                     checks: list | None = None, trace_needed: list | None = None,
                     resolve: Callable | None = None, expected: Callable | None = None):
    """Dynamo + AOTAutograd + Inductor on `call(*args, **kwargs)`, whole-graph,
    returning PyTorch's AOTCompiledFunction; PrecompileUnsupported when the
    region cannot take this path (the message says why).

    With `checks` (a list), it receives the region's portable guard checks
    (guard_checks.py): every guard Dynamo built, translated for another
    process; a guard without a portable check raises PrecompileUnsupported,
    unless `trace_needed` (a list) is given: it then receives the reasons
    and the function is returned (the caller adds a trace check,
    trace_capture.py). `call`'s first parameter is named `block` and takes
    args[0]. `resolve` and `expected` are kcache's portable-check readers
    (kcache.guards.portable_checks; passed in, so that this package imports
    nothing of kcache's): the same code reads a check here and in the warm
    process."""
    patches = inductor_config_patches(mode, options, dynamic)
    forget_automatic_dynamic(call)
    failed: list[str] = []

    def guard_filter(entries):
        keep = keep_serializable_guards(entries)
        if checks is not None:
            f_locals = {"block": args[0], "args": tuple(args[1:]), "kwargs": dict(kwargs)}
            try:
                checks.extend(guard_checks.portable_checks(entries, call.__globals__, f_locals, resolve,
                                                          expected))
            except guard_checks.NoPortableCheck as e:
                failed.append(str(e))
            keep = _drop_through_local_classes(entries, keep, call.__globals__, f_locals, failed, resolve)
        return keep

    compiled = torch.compile(call, fullgraph=True, backend="inductor", dynamic=dynamic,
                             options={**patches, "guard_filter_fn": guard_filter})
    try:
        fn = compiled.aot_compile((tuple(args), dict(kwargs)))
    except Exception as e:  # noqa: BLE001 - every failure is a reason to fall back
        raise PrecompileUnsupported(_first_line(e)) from e
    if failed:
        if trace_needed is None:
            raise PrecompileUnsupported("a guard has no portable check: " + failed[0])
        trace_needed.extend(failed)
    return fn


def forget_automatic_dynamic(fn) -> None:
    """Each trace of `fn` starts as the first one in a fresh process would.

    Dynamo remembers, per code object, which sizes and scalars changed
    between traces (automatic dynamic) and makes them dynamic on the next
    trace: a second block traced in the same process would get another
    graph (a float like eps turned into a tensor) than in a fresh process.
    kcache forgets that memory for its own `call` only, before each trace.
    """
    from torch._dynamo import pgo

    code = fn.__code__
    state = pgo.get_code_state()
    for code_id in [c for c in state if c.name == code.co_name
                    and c.firstlineno == code.co_firstlineno]:
        del state[code_id]


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def serialize_aot(fn) -> bytes:
    """Bytes of an AOTCompiledFunction, without the copies of whole module
    sources PyTorch keeps beside each inlined function's checksum (loading
    checks only the checksums; the copies are most of the bytes)."""
    import dataclasses

    info = fn._artifacts.source_info
    slim = {dataclasses.replace(s, content="") for s in info.inlined_sources}
    saved = info.inlined_sources
    info.inlined_sources = slim
    try:
        return type(fn).serialize(fn).serialized_data
    except Exception as e:  # noqa: BLE001 - a module or object that does not pickle
        raise PrecompileUnsupported(_first_line(e)) from e
    finally:
        info.inlined_sources = saved


def extern_kernel_table() -> dict[str, str]:
    """The extern kernels Inductor's generated code may call, each with
    where a warm process finds it without importing Inductor's compiler
    (recorded in a precompiled bundle; kcache/_torch_adaptor_imports.py)."""
    from .. import _torch_adaptor_imports

    return _torch_adaptor_imports.extern_kernel_table()


def compiler_modules_imported() -> list[str]:
    """Which of Inductor's compiler modules this process has imported (a
    warm process on precompiled regions imports none: tests and the demo
    job report it)."""
    from .. import _torch_adaptor_imports

    return _torch_adaptor_imports.compiler_modules_imported()


@contextlib.contextmanager
def without_header_precompiling() -> Iterator[None]:
    """Loading restored kernel libraries needs no precompiled header.

    PyTorch's loader (CppCodeCache.load_async) precompiles ATen's kernel
    header before it looks for the library: a `g++ -E` of the whole header
    and an `openssl sha512` in every process that loads a CPU kernel, and,
    where that header has no .gch yet, a 150 MB precompiled-header build.
    Those headers live under the system temp dir, not the Inductor cache
    dir, so a fresh container builds one although every library is there.
    The library's name does not depend on the header (its key is computed
    from the command line before the header is added), so skipping the
    header while restored regions load finds the same libraries; a library
    that is missing is built without it, with the same flags otherwise.
    (Not a config patch: inductor config is part of FX-graph cache keys.)
    """
    from torch._inductor import codecache

    real = codecache._precompile_header
    codecache._precompile_header = lambda *args, **kwargs: None
    try:
        yield
    finally:
        codecache._precompile_header = real


@contextlib.contextmanager
def same_build_options() -> Iterator[None]:
    """One CppTorchDeviceOptions per distinct argument list while a region loads.

    PyTorch's loader (CppCodeCache.load_async) builds two of them for every
    kernel it loads, only to name the kernel's library from their command
    line: each reads sysconfig, torch's include and library paths and the
    compiler's settings again (0.6 ms each here; 34 of them, of two argument
    lists, in a 12-block GPT-2's warm start). Within one load nothing they
    read changes, so a load reuses the first one built for the same
    arguments, as a copy whose lists are its own (the loader sets
    `precompiled_header` on them). Nothing is kept between loads. A torch
    whose code cache has no CppTorchDeviceOptions gets no memo
    (tests/python/compile/test_torch_adaptor.py fails loudly on that drift).
    """
    from torch._inductor import codecache

    real = getattr(codecache, "CppTorchDeviceOptions", None)
    if real is None:
        yield
        return
    built: dict[str, Any] = {}

    def options(*args: Any, **kwargs: Any) -> Any:
        key = repr((args, sorted(kwargs.items())))
        first = built.get(key)
        if first is None:
            first = built[key] = real(*args, **kwargs)
        out = copy.copy(first)
        for name, value in vars(first).items():
            if isinstance(value, list | dict | set):
                setattr(out, name, copy.copy(value))
        return out

    codecache.CppTorchDeviceOptions = options
    try:
        yield
    finally:
        codecache.CppTorchDeviceOptions = real


def deserialize_aot(data: bytes, f_globals: dict[str, Any],
                    extern_kernels: dict[str, str] | None = None):
    """An AOTCompiledFunction from serialize_aot's bytes. Runs no Dynamo,
    AOTAutograd or Inductor codegen; Inductor's generated modules are written
    and their C++ libraries loaded from the cache dir (restore them first).
    With the bundle's extern-kernel table, the generated modules load
    without importing Inductor's compiler (kcache/_torch_adaptor_imports.py).
    Raises PrecompileUnsupported when the bytes are for another system or a
    source file the function inlined has changed."""
    from torch._dynamo.aot_compile import AOTCompiledFunction

    from .._torch_adaptor_imports import light_imports
    from . import releases

    # a release's own fix to PyTorch's guard-state unpickling (v2_13.py)
    unpickling = getattr(releases.facts(torch.__version__) or releases.newest(), "guards_state_unpickling",
                         contextlib.nullcontext)
    try:
        with light_imports(extern_kernels), without_header_precompiling(), same_build_options(), \
                unpickling():
            fn = AOTCompiledFunction.deserialize(data, f_globals=f_globals)
    except Exception as e:  # noqa: BLE001 - another torch, a changed module, bad bytes
        raise PrecompileUnsupported(_first_line(e)) from e
    changed = changed_sources(fn)
    if changed:
        raise PrecompileUnsupported("source changed since it was compiled: " + ", ".join(changed))
    return fn


def changed_sources(fn) -> list[str]:
    """The inlined functions whose source differs from what was compiled
    ("module:first-last"), as PyTorch's own package loader checks them."""
    import importlib

    from torch._dynamo.package import _hash_sourcelines

    changed = []
    for s in sorted(fn.source_info().inlined_sources, key=lambda s: (s.module, s.firstlineno)):
        try:
            current = _hash_sourcelines(importlib.import_module(s.module), s.firstlineno,
                                        s.lastlineno)
        except (ImportError, OSError, TypeError):
            current = None
        if current != s.checksum:
            changed.append(f"{s.module}:{s.firstlineno}-{s.lastlineno}")
    return changed


def inlined_sources(fn) -> list[dict[str, Any]]:
    """[{module, first, last, sha256}] of every function Dynamo inlined."""
    return [{"module": s.module, "first": s.firstlineno, "last": s.lastlineno,
             "sha256": s.checksum}
            for s in sorted(fn.source_info().inlined_sources, key=lambda s: (s.module, s.firstlineno))]


def aot_guard_check(fn, *args: Any, **kwargs: Any) -> bool:
    """Whether the guards PyTorch kept for `fn` pass for these arguments."""
    return bool(fn.guard_check(*args, **kwargs))


def aot_guard_failure(fn, *args: Any, **kwargs: Any) -> str:
    """PyTorch's own words for the first guard that fails."""
    manager = fn._artifacts.guard_manager
    return str(manager.check_verbose(fn.prepare_f_locals(*args, **kwargs)))[:500]


def aot_run(fn, *args: Any, **kwargs: Any):
    """Calls the compiled function without a second guard check."""
    return fn.fn(*args, **kwargs)


def aot_guard_text(fn) -> str:
    return str(fn._artifacts.guard_manager)


# EQUALS_MATCH: L['block']._modules['attn'].layer_idx == 0
_CONSTANT_GUARD = None


def aot_guarded_constants(fn, local: str) -> list[str]:
    """Paths below the argument `local` whose plain values the kept guards
    pin (EQUALS/CONSTANT/TRUE/FALSE/NONE matches), e.g. "._modules['attn'].layer_idx".

    These are the per-block constants a region's graph or bytecode was
    specialized on: kcache keys a precompiled variant by their values.
    """
    import re

    global _CONSTANT_GUARD
    if _CONSTANT_GUARD is None:
        _CONSTANT_GUARD = re.compile(
            r"(?:EQUALS_MATCH|CONSTANT_MATCH|TRUE_MATCH|FALSE_MATCH|NONE_MATCH): L\['(\w+)'\]"
            r"((?:\._modules\['\w+'\]|\.\w+)*) (?:==|is) ")
    found = []
    for line in aot_guard_text(fn).splitlines():
        m = _CONSTANT_GUARD.search(line)
        if m and m.group(1) == local and m.group(2):
            found.append(m.group(2))
    return sorted(set(found))
