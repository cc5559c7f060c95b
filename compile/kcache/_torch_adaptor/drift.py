"""What check_torch() looks for in PyTorch beside plain attributes: a
module's source text (read without importing it) and the shapes of the
functions kcache patches."""

from __future__ import annotations

import pathlib

import torch


def core_required() -> dict[str, bool]:
    from torch.compiler import _cache

    from .._torch_adaptor_code_cache import import_code_cache

    codecache = import_code_cache()  # the first import in a warm job: without redis

    return {
        "torch.compiler._cache.CacheArtifactManager.with_fresh_cache": hasattr(
            getattr(_cache, "CacheArtifactManager", None), "with_fresh_cache"
        ),
        "torch.compiler.save_cache_artifacts": hasattr(torch.compiler, "save_cache_artifacts"),
        "torch.compiler.load_cache_artifacts": hasattr(torch.compiler, "load_cache_artifacts"),
        "torch._inductor.codecache.CppCodeCache._load_library": hasattr(
            codecache.CppCodeCache, "_load_library"
        ),
        "torch._inductor.codecache.CppPythonBindingsCodeCache.cache": hasattr(
            codecache.CppPythonBindingsCodeCache, "cache"
        ),
        "torch._inductor.list_mode_options": hasattr(torch._inductor, "list_mode_options"),
        "torch._functorch.config.force_non_lazy_backward_lowering": hasattr(
            torch._functorch.config, "force_non_lazy_backward_lowering"
        ),
        "torch._functorch.config.autograd_cache_allow_custom_autograd_functions": hasattr(
            torch._functorch.config, "autograd_cache_allow_custom_autograd_functions"
        ),
        "torch._functorch._aot_autograd.autograd_cache.check_node_safe": _has_check_node_safe(),
        "torch.amp.autocast_mode._enter_autocast / _exit_autocast": hasattr(
            torch.amp.autocast_mode, "_enter_autocast") and hasattr(torch.amp.autocast_mode, "_exit_autocast"),
        "torch._inductor.compile_fx.dynamo_utils.count_calls (the call-free shortcut)":
            _has_call_free_shortcut(),
        "torch._inductor.runtime.cache_dir_utils.cache_dir": _has_cache_dir(),
        "torch._inductor.aoti_compile_and_package": hasattr(torch._inductor, "aoti_compile_and_package"),
        "torch._inductor.config.aot_inductor.package_constants_in_so": hasattr(
            torch._inductor.config.aot_inductor, "package_constants_in_so"),
        "torch._inductor.cpu_vec_isa.VecISA.check_build(self, code)": _has_isa_checks(),
        "torch._inductor.codecache._precompile_header (called by CppCodeCache.load_async)":
            _loader_calls("_precompile_header"),
        "torch._inductor.codecache.CppTorchDeviceOptions (built by CppCodeCache.load_async)":
            _loader_calls("CppTorchDeviceOptions"),
    }


def _module_text(name: str) -> str:
    """A module's source, read without importing it: a warm start must not
    import Inductor's compiler (compile_fx imports lowering and codegen)."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    return pathlib.Path(spec.origin).read_text() if spec and spec.origin else ""


def _has_check_node_safe() -> bool:
    src = _module_text("torch._functorch._aot_autograd.autograd_cache")
    return "def check_node_safe(" in src and "class BypassAOTAutogradCache" in src


def _has_call_free_shortcut() -> bool:
    src = _module_text("torch._inductor.compile_fx")
    return "def count_calls" in _module_text("torch._dynamo.utils") and \
        "dynamo_utils.count_calls(gm.graph) == 0" in src


def _loader_calls(name: str) -> bool:
    """Whether PyTorch's kernel loader calls codecache's `name` through the
    module's global (what kcache's load window replaces:
    _torch_adaptor/precompiled.py)."""
    import inspect

    from torch._inductor import codecache

    return callable(getattr(codecache, name, None)) and \
        f"{name}(" in inspect.getsource(codecache.CppCodeCache.load_async)


def _has_isa_checks() -> bool:
    import inspect

    from torch._inductor import cpu_vec_isa as isa

    check = getattr(getattr(isa, "VecISA", None), "check_build", None)
    listing = getattr(isa, "valid_vec_isa_list", None)
    return (check is not None and list(inspect.signature(check).parameters) == ["self", "code"]
            and hasattr(listing, "cache_info") and hasattr(isa.VecISA, "build_arch_flags"))


def _has_cache_dir() -> bool:
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir  # noqa: F401
    except ImportError:
        return False
    return True
