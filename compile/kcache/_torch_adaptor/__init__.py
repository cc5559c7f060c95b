"""The one place where kcache touches PyTorch's private compiler APIs.

PyTorch's compiler internals change between releases. Everything kcache
needs from them goes through this package, which is pinned to the torch
version it was written and tested against (TESTED_TORCH). On any other
version `check_torch()` raises, naming what drifted, unless
KCACHE_ALLOW_UNTESTED_TORCH=1; tests/python/test_torch_adaptor.py fails
loudly when an attribute used here disappears.

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
- precompiled regions: Dynamo's own output for one block (aot_compile),
  serialized, deserialized, its guards checked and its constants read
  (kcache.precompiled, docs/precompiled.md), loaded with stand-ins for
  Inductor's compiler modules that its generated code imports but does not
  need (kcache/_torch_adaptor_imports.py, kept outside this package so that
  it imports without torch's compiler).

One file per idea (drift.py, inductor.py, config_key.py, capture.py,
target.py, aoti.py, gpu_kernels.py, precompiled.py, guard_checks.py,
trace_capture.py, hooks.py, graph_ops.py);
callers import only this package, `from kcache import _torch_adaptor as
adaptor`, and reach every name through it.
"""

from __future__ import annotations

import os

import torch

from .aoti import aoti_compile_package, aoti_load_package
from .capture import Capture, record_loaded_libraries, capture_region, restore_region
from .config_key import config_fingerprint, ensure_recompile_limit
from .gpu_kernels import triton_cubins
from .graph_ops import is_aten_op, reset_dynamo
from .inductor import (
    inductor_cache_dir, counters, inductor_config_patches, compile_with_inductor, input_sources,
    call_free_graphs_cached, custom_autograd_cacheable, compile_uncached, rewrite_fx_entries,
)
from .hooks import module_hooks
from .precompiled import (
    keep_serializable_guards, PrecompileUnsupported, aot_compile_call, serialize_aot,
    extern_kernel_table, compiler_modules_imported, without_header_precompiling, deserialize_aot,
    changed_sources, inlined_sources, aot_guard_check, aot_guard_failure, aot_run, aot_guard_text,
    aot_guarded_constants,
)
from .trace_capture import capture_graph
from .target import cpu_vec_isa, isa_checks_done, isa_checks, isa_probe_binaries, host_compiler

TESTED_TORCH = "2.13.0"


class TorchDrift(RuntimeError):
    """PyTorch no longer has what this adaptor relies on."""


def torch_version() -> str:
    return torch.__version__.split("+")[0]


def check_torch() -> None:
    if torch_version() != TESTED_TORCH and os.environ.get("KCACHE_ALLOW_UNTESTED_TORCH") != "1":
        raise TorchDrift(
            f"kcache's PyTorch adaptor is tested with torch {TESTED_TORCH}, found "
            f"{torch.__version__}; set KCACHE_ALLOW_UNTESTED_TORCH=1 to try anyway"
        )
    missing = [name for name, ok in _required().items() if not ok]
    if missing:
        raise TorchDrift("PyTorch internals kcache needs are missing: " + ", ".join(missing))


def _required() -> dict[str, bool]:
    from . import drift, graph_ops, hooks, precompiled, trace_capture

    return {**drift.core_required(), **precompiled.required(), **hooks.required(),
            **trace_capture.required(), **graph_ops.required()}
