"""Part of the torch adaptor: loading a precompiled region without importing
Inductor's compiler.

A warm process that deserializes a precompiled region runs Inductor's
generated modules. Their header imports three names whose modules pull in
all of Inductor's compiler (lowering, IR, scheduler, code generation, the
kernel templates): about 1 CPU-second on this machine, most of what a warm
start still cost once Dynamo, AOTAutograd and the kernel builds were gone
(docs/precompiled.md, "What a warm start still costs"):

  from torch._inductor.codegen.memory_planning import _align as align
  from torch._inductor.select_algorithm import extern_kernels
  (then PyTorch's cache-hit path)  from .graph import GraphLowering
  (and every call)                 torch._inductor.debug.RECORD_GRAPH_EXECUTION

Two more are imported by the load itself, not by the generated code
(issue 52, about 0.19 s of a warm start's first step on this machine):

  (the pickled graph's kwargs)  torch._inductor.decomposition.select_decomp_table
  (each C++ kernel's loader)    from torch.utils.cpp_extension import include_paths, TORCH_LIB_PATH
                                cpp_extension.include_paths(...), cpp_extension.library_paths(...)

decomposition registers every decomposition Inductor has (0.14 s), for a
function only a new compile calls; cpp_extension imports setuptools
(0.05 s), for two paths under torch's own directory.

None of them needs the compiler. While kcache deserializes a region (and
only then, and only for modules not yet imported), `light_imports()` puts
stand-ins for those modules in sys.modules that hold the same objects:

- memory_planning's `_align` is torch._inductor.utils._align (the very
  object memory_planning imports);
- select_algorithm's `extern_kernels` is a namespace of the extern kernels
  the generated code calls (torch.mm, torch.addmm, torch.ops.mkldnn...),
  resolved from a table recorded when the region was compiled, where each
  entry was checked to be the identical object PyTorch registers;
- decomposition's `select_decomp_table` is a function that calls the
  real one (importing it then), so a compile that ever calls it gets the
  real table; it is the only stand-in that is not the identical object;
- cpp_extension's `TORCH_LIB_PATH`, `include_paths()` and
  `library_paths()` for the CPU are
  the same paths, computed from torch's directory as cpp_extension does;
  any other device asks the real module;
- graph's `GraphLowering.save_output_code` and debug's
  `RECORD_GRAPH_EXECUTION` are PyTorch's test hooks, None and False unless
  a test sets them (which imports the real module first).

Any other attribute of a stand-in, or an extern kernel the table lacks,
ends the stand-ins (removes them from sys.modules), imports the real
module and answers from it: never a wrong object, at worst today's cost.
cpp_extension is a leaf (its real import imports none of the others):
another attribute of it ends only its own stand-in, and a write to it goes
to the real module (torch 2.14 and 2.15 read and may set
`cpp_extension.CUDA_HOME` in every kernel's loader, so there the load
still imports cpp_extension, and nothing else of the compiler).
The stand-ins leave sys.modules when the load ends; the package attribute
torch._inductor.debug is replaced by the real module when that is imported.
tests/python/compile/test_light_imports.py checks every one of these facts against
the real modules, so a torch that changes them fails there.

Inductor's code cache itself, which a warm job imports, is lighter too:
kcache/_torch_adaptor_code_cache.py.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

import torch

SELECT_ALGORITHM = "torch._inductor.select_algorithm"
MEMORY_PLANNING = "torch._inductor.codegen.memory_planning"
GRAPH = "torch._inductor.graph"
DEBUG = "torch._inductor.debug"
DECOMPOSITION = "torch._inductor.decomposition"
CPP_EXTENSION = "torch.utils.cpp_extension"
# Modules whose real import imports none of the stood-in ones: asking
# their stand-in for something else ends that stand-in alone (torch 2.14
# and 2.15 read cpp_extension.CUDA_HOME in every C++ kernel's loader).
LEAVES = frozenset({CPP_EXTENSION})
# What PyTorch's generated modules and its cache-hit path would import
# through the stand-ins: tests assert none of them is imported by a load.
COMPILER_MODULES = (SELECT_ALGORITHM, MEMORY_PLANNING, GRAPH, DEBUG, "torch._inductor.lowering",
                    "torch._inductor.ir", "torch._inductor.scheduler",
                    "torch._inductor.codegen.wrapper", DECOMPOSITION)
DEBUG_DEFAULTS = {"RECORD_GRAPH_EXECUTION": False, "GRAPH_EXECUTION_ORDER": None,
                  "GRAPH_COMPILE_IDS": None}

_active: dict[str, types.ModuleType] = {}
_stats = {"loads_light": 0, "real_imports": 0}


# ------------------------------------------------------------ the table


def _locate(obj: Any) -> str | None:
    """Where a warm process finds `obj` without Inductor: "torch:mm" or
    "ops:mkldnn._linear_pointwise.binary"; None if neither is `obj`."""
    if isinstance(obj, torch._ops.OpOverloadPacket | torch._ops.OpOverload):
        loc = f"ops:{obj}"
    else:
        loc = f"torch:{getattr(obj, '__name__', '')}"
    try:
        return loc if _resolve(loc) is obj else None
    except (AttributeError, RuntimeError):
        return None


def _resolve(loc: str) -> Any:
    kind, path = loc.split(":", 1)
    obj: Any = torch if kind == "torch" else torch.ops
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def extern_kernel_table() -> dict[str, str]:
    """Name -> locator for every extern kernel Inductor registered that a
    warm process can find without Inductor (each checked to be the same
    object). Called where Inductor has compiled, so the registry is full."""
    from torch._inductor.select_algorithm import extern_kernels

    table = {}
    for name, obj in vars(extern_kernels).items():
        loc = _locate(obj)
        if loc is not None:
            table[name] = loc
    return table


# ------------------------------------------------------------ stand-ins


def _end() -> None:
    """Removes every stand-in from sys.modules, so the next import of one
    of those modules is the real one."""
    for name, mod in list(_active.items()):
        if sys.modules.get(name) is mod:
            del sys.modules[name]
    _active.clear()


def _real(name: str) -> types.ModuleType:
    """The real module `name`, imported now; first every stand-in ends (the
    real module may import the others, and must get them real), except for
    a leaf (LEAVES): only its own stand-in ends."""
    if name in LEAVES:
        if sys.modules.get(name) is _active.pop(name, None):
            del sys.modules[name]
    else:
        _end()
    _stats["real_imports"] += 1
    return importlib.import_module(name)


class _ExternKernels:
    """select_algorithm.extern_kernels for generated code: the recorded
    kernels, anything else from the real namespace."""

    def __init__(self, table: dict[str, str]) -> None:
        # The table comes from a bundle: an entry that is not a locator is
        # left out (the real namespace answers for it), never an error.
        self.__dict__["_table"] = {
            n: loc for n, loc in (table.items() if isinstance(table, dict) else ())
            if isinstance(n, str) and isinstance(loc, str) and loc.startswith(("torch:", "ops:"))}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        table = self.__dict__["_table"]
        if name in table:
            try:
                obj = _resolve(table[name])
            except (AttributeError, RuntimeError, ValueError):
                obj = getattr(_real(SELECT_ALGORITHM).extern_kernels, name)
        else:
            obj = getattr(_real(SELECT_ALGORITHM).extern_kernels, name)
        self.__dict__[name] = obj
        return obj


class _LeafStandIn(types.ModuleType):
    """A leaf's stand-in: what it holds, and the real module for anything
    else. A write goes to the real module, and from then on that name is
    read from there too (torch 2.14's loader sets cpp_extension.CUDA_HOME
    from the environment where the module found none)."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(_real(self.__name__), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr.startswith("__"):
            super().__setattr__(attr, value)
            return
        setattr(_module(self.__name__), attr, value)
        self.__dict__.pop(attr, None)


def _stand_in(name: str, attrs: dict[str, Any]) -> types.ModuleType:
    if name in LEAVES:
        leaf = _LeafStandIn(name, "kcache's stand-in (kcache/_torch_adaptor_imports.py)")
        leaf.__dict__.update(attrs, __kcache_stand_in__=True)
        return leaf
    mod = types.ModuleType(name, "kcache's stand-in (kcache/_torch_adaptor_imports.py)")

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(_real(name), attr)

    mod.__dict__.update(attrs, __getattr__=__getattr__, __kcache_stand_in__=True)
    return mod


class _GraphLowering:
    save_output_code = None  # PyTorch's test hook, read on every cache hit


def _module(name: str) -> types.ModuleType:
    """The real module, imported now if only a stand-in (or nothing) is there."""
    mod = sys.modules.get(name)
    return _real(name) if mod is None or is_stand_in(mod) else mod


def select_decomp_table(*args: Any, **kwargs: Any) -> Any:
    """decomposition.select_decomp_table for a loaded graph's kwargs: a
    compile that calls it gets the real table."""
    return _module(DECOMPOSITION).select_decomp_table(*args, **kwargs)


def _torch_path() -> str:
    """cpp_extension's _TORCH_PATH: the directory of the torch package."""
    return os.path.dirname(os.path.abspath(torch.__file__))


def include_paths(device_type: str = "cpu", torch_include_dirs: bool = True) -> list[str]:
    """cpp_extension.include_paths: torch's own headers for the CPU (what
    a C++ kernel's loader asks for); the real function for any other device."""
    if device_type != "cpu":
        return _module(CPP_EXTENSION).include_paths(device_type, torch_include_dirs)
    include = os.path.join(_torch_path(), "include")
    return [include, os.path.join(include, "torch", "csrc", "api", "include")] if torch_include_dirs else []


def library_paths(device_type: str = "cpu", torch_include_dirs: bool = True,
                  cross_target_platform: str | None = None) -> list[str]:
    """cpp_extension.library_paths: torch's lib directory for the CPU; the
    real function for any other device."""
    if device_type != "cpu":
        return _module(CPP_EXTENSION).library_paths(device_type, torch_include_dirs, cross_target_platform)
    return [os.path.join(_torch_path(), "lib")] if torch_include_dirs else []


def _stand_ins(table: dict[str, str]) -> dict[str, dict[str, Any]]:
    from torch._inductor import utils

    return {MEMORY_PLANNING: {"_align": utils._align},
            SELECT_ALGORITHM: {"extern_kernels": _ExternKernels(table)},
            GRAPH: {"GraphLowering": _GraphLowering},
            DECOMPOSITION: {"select_decomp_table": select_decomp_table},
            CPP_EXTENSION: {"include_paths": include_paths, "library_paths": library_paths,
                            "TORCH_LIB_PATH": os.path.join(_torch_path(), "lib")}}


@contextlib.contextmanager
def light_imports(table: dict[str, str] | None) -> Iterator[None]:
    """Stand-ins for Inductor's compiler modules while a region loads.
    `table` is the region's recorded extern-kernel table (None: no stand-ins
    at all, today's imports)."""
    if table is None or _active:
        yield
        return
    import torch._inductor as inductor

    for name, attrs in _stand_ins(table).items():
        if name not in sys.modules:
            _active[name] = sys.modules[name] = _stand_in(name, attrs)
    if DEBUG not in sys.modules and "debug" not in vars(inductor):
        # Read as an attribute on every call of a compiled graph; the real
        # module's import replaces it.
        inductor.debug = _stand_in(DEBUG, DEBUG_DEFAULTS)
    _stats["loads_light"] += 1
    try:
        yield
    finally:
        _end()


def compiler_modules_imported() -> list[str]:
    """Which of Inductor's compiler modules this process has imported for
    real (stand-ins do not count)."""
    return [m for m in COMPILER_MODULES
            if m in sys.modules and not is_stand_in(sys.modules[m])]


def is_stand_in(mod: Any) -> bool:
    return getattr(mod, "__dict__", {}).get("__kcache_stand_in__") is True


def stats() -> dict[str, int]:
    return dict(_stats)
