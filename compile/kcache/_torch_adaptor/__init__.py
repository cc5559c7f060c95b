"""The one place where kcache touches PyTorch's private compiler APIs.

PyTorch's compiler internals change between releases. Everything kcache
needs from them goes through this package. The supported releases
(releases.SUPPORTED: torch 2.13, 2.14 and 2.15, every patch release) each
have a module in releases/ with what differs in them; `support()` decides
once per process what kcache does on the torch it finds: everything, the
traced path only, or nothing (stock torch.compile), and says why
(docs/torch-support.md). `check_torch()` raises, naming what drifted;
tests/python/compile/test_torch_adaptor.py fails loudly when an attribute used
here disappears.

What it provides:
- a fresh Mega-Cache recording around one region's compile
  (CacheArtifactManager.with_fresh_cache) and its serialized bytes;
- a recorder of the compiled C++ binaries (.so) the region's code loads:
  on CPU an FX-graph cache entry holds Python source only, and without its
  .so files a fresh process would run the host compiler again;
- restore: Mega-Cache bytes into PyTorch's caches, binaries into the
  Inductor cache directory where PyTorch looks for them;
- Inductor's compile entry point with mode / options applied;
- PyTorch's own counters, which tests use to prove hits;
- a hook around Inductor's build of each CPU kernel library (cpp_build.py),
  through which compile workers share kernels;
- precompiled regions: Dynamo's own output for one block (aot_compile),
  serialized, deserialized, its guards checked and its constants read
  (kcache.precompiled, docs/precompiled.md), loaded with stand-ins for
  Inductor's compiler modules that its generated code imports but does not
  need (kcache/_torch_adaptor_imports.py, kept outside this package so that
  it imports without torch's compiler).

This package is the bottom layer: it imports nothing of kcache's except
its sibling _torch_adaptor_imports (scripts/check_py_layers.py). What it needs
from kcache (the portable checks' readers, settings) is passed in.

One file per idea (drift.py, compiled_module.py, versions.py, inductor.py, config_key.py, capture.py,
target.py, aoti.py, gpu_kernels.py, precompiled.py, guard_checks.py,
trace_capture.py, hooks.py, graph_ops.py, cpp_build.py, graph_ship.py);
callers import only this package, `from kcache import _torch_adaptor as
adaptor`, and reach every name through it.
"""

from __future__ import annotations

import logging

import torch

from .aoti import aoti_compile_package, aoti_load_package
from .compiled_module import OptimizedModule, init_optimized_module
from .versions import dict_version
from .capture import Capture, record_loaded_libraries, capture_region, restore_region
from .cpp_build import hook_library_builds, library_build_hook_available
from .config_key import (
    config_fingerprint, ensure_recompile_limit, config_snapshot, config_restore, NotKeyable, NotCarried,
    code_digest,
)
from . import config_table, global_flags
from .gpu_kernels import triton_cubins
from .graph_ops import is_aten_op, reset_dynamo, in_backward
from .inductor import (
    inductor_cache_dir, counters, inductor_config_patches, compile_with_inductor, input_sources,
    call_free_graphs_cached, custom_autograd_cacheable, compile_uncached, rewrite_fx_entries,
)
from .hooks import module_hooks
from .fsdp import plain_class, traced_as_plain
from .precompiled import (
    keep_serializable_guards, PrecompileUnsupported, aot_compile_call, serialize_aot,
    extern_kernel_table, compiler_modules_imported, without_header_precompiling, deserialize_aot,
    changed_sources, inlined_sources, aot_guard_check, aot_guard_failure, aot_run, aot_guard_text,
    aot_guarded_constants,
)
from .trace_capture import capture_graph
from .graph_ship import NotShippable, ship_graph, land_graph, compile_landed, graph_ship_missing
from .target import cpu_vec_isa, isa_checks_done, isa_checks, isa_probe_binaries, host_compiler

from . import releases


class TorchDrift(RuntimeError):
    """PyTorch no longer has what this adaptor relies on."""


def torch_version() -> str:
    return torch.__version__.split("+")[0]


def check_torch(allow_untested: bool = False) -> None:
    """Raises TorchDrift unless this torch is a supported release (or
    `allow_untested`: KCACHE_ALLOW_UNTESTED_TORCH, read by kcache.settings)
    with every private API the adaptor uses."""
    if releases.facts(torch_version()) is None and not allow_untested:
        raise TorchDrift(
            f"kcache supports torch {', '.join(releases.SUPPORTED)} (any patch release), found "
            f"{torch.__version__}; set KCACHE_ALLOW_UNTESTED_TORCH=1 to try anyway"
        )
    missing = [name for name, ok in _required().items() if not ok]
    if missing:
        raise TorchDrift("PyTorch internals kcache needs are missing: " + ", ".join(missing))


class Support:
    """What kcache does on this torch: "precompiled" (everything),
    "traced" (Dynamo traces every process; kcache caches what Inductor
    compiles, whose entries PyTorch itself keys and checks) or "stock"
    (PyTorch's own torch.compile, untouched), with the sentence said once
    when it is not everything (docs/torch-support.md)."""

    def __init__(self, path: str, message: str | None) -> None:
        self.path, self.message = path, message


_support: Support | None = None


def support(allow_untested: bool = False) -> Support:
    """This process's Support, decided once and said once (a warning).
    `allow_untested`: KCACHE_ALLOW_UNTESTED_TORCH (kcache.settings; this
    package reads no setting and imports nothing of kcache's)."""
    global _support
    if _support is None:
        _support = decide_support(torch_version(), _required(), _traced_required(), allow_untested)
        if _support.message:
            logging.getLogger("kcache").warning("kcache: %s", _support.message)
    return _support


def decide_support(version: str, required: dict[str, bool], traced_required: dict[str, bool],
                   allow_untested: bool) -> Support:
    """The rule, as a pure function of what was found (tested without
    installing another torch)."""
    window = ", ".join(releases.SUPPORTED)
    in_window = releases.facts(version) is not None
    missing = [n for n, ok in required.items() if not ok]
    traced_missing = [n for n, ok in traced_required.items() if not ok]
    if (in_window or allow_untested) and not missing:
        note = None if in_window else (f"torch {version} is outside the supported releases ({window}); "
                                       "KCACHE_ALLOW_UNTESTED_TORCH=1: using every path anyway")
        return Support("precompiled", note)
    where = (f"torch {version} is outside the supported releases ({window})" if not in_window else
             f"torch {version} lacks PyTorch internals kcache needs ({', '.join(missing)})")
    if not traced_missing:
        return Support("traced", f"{where}: precompiled regions are off; every process traces with "
                                 "Dynamo and kcache caches what Inductor compiles")
    return Support("stock", f"{where}: kcache is off and torch.compile runs unchanged "
                            f"(missing for the traced path: {', '.join(traced_missing)})")


def _traced_required() -> dict[str, bool]:
    """What the traced path needs: the Inductor caches, the loader and the
    hooks kcache patches."""
    from . import drift, graph_ops, hooks

    return {**drift.core_required(), **hooks.required(), **graph_ops.required()}


def _required() -> dict[str, bool]:
    """Everything: the traced path's needs, aot_compile and the trace checks."""
    from . import compiled_module, precompiled, trace_capture, versions

    return {**_traced_required(), **precompiled.required(), **trace_capture.required(),
            **compiled_module.required(), **versions.required()}
