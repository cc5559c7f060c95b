"""The one place where kcache touches PyTorch's private compiler APIs.

PyTorch's compiler internals change between releases. Everything kcache
needs from them goes through this module, which is pinned to the torch
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
  need (kcache/_torch_adaptor_imports.py, this adaptor's second file).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import torch

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
    from torch._inductor import codecache
    from torch.compiler import _cache

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
            _loader_precompiles_headers(),
        **_precompile_required(),
        **_module_hooks_required(),
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


def _loader_precompiles_headers() -> bool:
    import inspect

    from torch._inductor import codecache

    return callable(getattr(codecache, "_precompile_header", None)) and \
        "_precompile_header(" in inspect.getsource(codecache.CppCodeCache.load_async)


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


def inductor_cache_dir() -> pathlib.Path:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return pathlib.Path(cache_dir())


# ---------------------------------------------------------------- counters


def counters() -> dict[str, dict[str, int]]:
    """A copy of PyTorch's own compile counters (torch._dynamo.utils.counters)."""
    from torch._dynamo.utils import counters as c

    return {k: dict(v) for k, v in c.items()}


# ---------------------------------------------------------------- compile


def inductor_config_patches(mode: str | None, options: dict[str, Any] | None, dynamic: bool | None):
    """The Inductor config a torch.compile(mode=…, options=…) call would apply."""
    patches: dict[str, Any] = {}
    if mode and mode != "default":
        patches.update(torch._inductor.list_mode_options(mode, dynamic))
    if options:
        patches.update(options)
    return patches


def compile_with_inductor(gm, example_inputs, config_patches: dict[str, Any]):
    """Compiles a Dynamo graph exactly as the "inductor" backend would, so
    that everything it produces lands in PyTorch's caches.

    Backward graphs are lowered eagerly (force_non_lazy_backward_lowering) so
    that one region's compile produces all of its artifacts inside one
    recording; the flag is set on hits too, so it cannot split keys. Two
    kinds of graph would otherwise leave no AOTAutograd entry, so that every
    start misses AOTAutograd's cache and traces them again (what DeepSpeed
    ZeRO 3's regions showed, docs/distributed.md): graphs whose forward or
    backward has no op (call_free_graphs_cached) and graphs that call a
    custom autograd.Function (custom_autograd_cacheable). Both are decided
    by the graph alone, identically on a miss and on a hit.
    """
    from torch._inductor.compile_fx import compile_fx

    functorch = {"force_non_lazy_backward_lowering": True}
    if custom_autograd_cacheable(gm):
        functorch["autograd_cache_allow_custom_autograd_functions"] = True
    with torch._functorch.config.patch(**functorch), call_free_graphs_cached():
        return compile_fx(gm, example_inputs, config_patches=config_patches or None)


def input_sources(gm) -> str:
    """Where Dynamo took each graph input from ("L['residual']", …), in order.

    Not part of kcache's key (two graphs that compute the same thing from
    inputs of the same metadata share a key, wherever they come from), but
    part of AOTAutograd's: its cache key hashes the input sources
    (aot_config), so such a graph misses the AOTAutograd entry the first one
    saved (kcache.backend keeps a variant for it)."""
    names = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", None)
        names.append(str(name() if callable(name) else name))
    return ", ".join(names)


class _AtLeastOneCall:
    """torch._dynamo.utils as compile_fx sees it inside call_free_graphs_cached:
    every attribute is the real module's, but count_calls never says 0."""

    def __init__(self, real) -> None:
        self._real = real

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def count_calls(self, graph) -> int:
        return max(1, self._real.count_calls(graph))


@contextlib.contextmanager
def call_free_graphs_cached() -> Iterator[None]:
    """Inductor compiles graphs without ops like any other.

    _compile_fx_inner returns a graph with no call (a backward that only
    passes its gradient on, an inference graph of views and no-ops) as it
    is, before its FX-graph cache runs. That function has no FX-graph cache
    key, and AOTAutograd saves an entry only when the forward and the
    backward both have one (graph_compile._should_save_cache): such a region
    misses AOTAutograd's cache at every start, and one with no op on either
    side records nothing at all (pytorch/pytorch#141790; PyTorch's later fix,
    #186053, does what this does: call-free graphs go through the FX-graph
    cache when AOTAutograd is saving an entry). Compiling such a graph
    generates a function that returns its inputs: no kernel, no host
    compiler. Graphs with ops are untouched, so are their cache keys.
    """
    from torch._inductor import compile_fx as cfx

    real = cfx.dynamo_utils
    if isinstance(real, _AtLeastOneCall):  # nested: already in place
        yield
        return
    cfx.dynamo_utils = _AtLeastOneCall(real)
    try:
        yield
    finally:
        cfx.dynamo_utils = real


def custom_autograd_cacheable(gm) -> bool:
    """True when the graph calls a custom autograd.Function
    (autograd_function_apply) and AOTAutogradCache may cache it.

    AOTAutogradCache bypasses such graphs unless
    autograd_cache_allow_custom_autograd_functions is set (pytorch/pytorch#149751:
    the higher-order op is pure in the Dynamo graph's inputs, kept behind a
    flag while PyTorch rolls it out); the FX-graph cache already caches
    their forward and backward. DeepSpeed ZeRO 3 routes every Linear through
    one (LinearFunctionForZeroStage3). The flag is set only for graphs whose
    forward and backward bodies pass AOTAutogradCache's own node check too
    (which PyTorch 2.13 applies to the outer graph only: a body calling an
    opaque callable would be keyed by its name alone, pytorch/pytorch#194658),
    except for autocast's enter and exit, whose every argument is a constant
    in the graph's code and so in the key (the allowlist gap of
    pytorch/pytorch#191106; ZeRO 3's backward runs under
    autocast_custom_bwd). Any other graph's AOTAutograd key stays as it was.
    """
    from torch._functorch._aot_autograd import autograd_cache as ac
    from torch._functorch.autograd_function import AutogradFunctionApply

    autocast = {torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast}

    def bodies_safe(module) -> bool:
        for node in module.graph.nodes:
            try:
                ac.check_node_safe(node)
            except ac.BypassAOTAutogradCache:
                target = getattr(node, "target", None)
                if not (isinstance(target, AutogradFunctionApply) or target in autocast):
                    return False
            if node.op == "get_attr":
                sub = getattr(module, node.target, None)
                if isinstance(sub, torch.fx.GraphModule) and not bodies_safe(sub):
                    return False
        return True

    graph = getattr(gm, "graph", None)
    if graph is None or not any(n.op == "call_function" and isinstance(n.target, AutogradFunctionApply)
                                for n in graph.nodes):
        return False
    return bodies_safe(gm)


def compile_uncached(gm, example_inputs, config_patches: dict[str, Any]):
    """Compiles with every PyTorch cache bypassed (a refused region's fresh compile)."""
    with torch._inductor.config.patch(force_disable_caches=True):
        return compile_with_inductor(gm, example_inputs, config_patches)


def rewrite_fx_entries(mega_cache: bytes, transform) -> bytes:
    """Unpickles each FX-graph entry in Mega-Cache bytes, lets `transform`
    mutate it, and serializes the result again.

    Test support: it is how tests plant a valid, correctly keyed bundle whose
    code was altered, to prove that verify-on-first-use refuses it.
    """
    import pickle

    from torch.compiler._cache import CacheArtifactManager

    artifacts = CacheArtifactManager.deserialize(mega_cache)
    with CacheArtifactManager.with_fresh_cache():
        for artifact_type, items in artifacts.items():
            for artifact in items:
                content = artifact.content
                if artifact_type == "inductor":
                    entry = pickle.loads(content)
                    transform(entry)
                    content = pickle.dumps(entry)
                CacheArtifactManager.record_artifact(artifact_type, artifact.key, content)
        data, _info = CacheArtifactManager.serialize()
    return data


# Config entries that bound how often Dynamo recompiles, not what any
# compile produces: kcache raises them (ensure_recompile_limit) and they
# must not split keys.
# Also neutral: where torch is installed and where debug output goes
# (absolute paths: they differ between checkouts and ranks, and a key that
# holds them misses for no reason), and the compiler's path (its identity,
# from its version output, is in the toolchain field).
# error_on_custom_op_aliasing defaults to bool($CI): CI runners set CI=1, and
# it only chooses between an error and a warning (found when every golden
# key moved under the project's CI).
_NEUTRAL_CONFIG = frozenset({
    "recompile_limit", "accumulated_recompile_limit", "cache_size_limit",
    "accumulated_cache_size_limit", "base_dir", "debug_dir_root", "cpp.cxx",
    "error_on_custom_op_aliasing",
})


def config_fingerprint() -> str:
    """Hash of the Inductor, functorch and Dynamo configs that shape code."""
    h = hashlib.sha256()
    for cfg in (torch._inductor.config, torch._functorch.config, torch._dynamo.config):
        # save_config_portable() drops fields marked as irrelevant to caching.
        portable = cfg.save_config_portable()
        items = sorted((k, _stable_repr(v)) for k, v in portable.items() if k not in _NEUTRAL_CONFIG)
        h.update(repr(items).encode())
    return h.hexdigest()[:16]


def ensure_recompile_limit(blocks: int) -> None:
    """Lets Dynamo trace every block of a region.

    Dynamo re-traces each block of a regional compile (its guards hold
    per-block constants such as transformers' layer_idx) and, past
    recompile_limit (8) traces of one code object, silently runs the rest
    eagerly: a 12-block model would run 4 blocks uncompiled. kcache raises
    the limit to cover the model's blocks.
    """
    cfg = torch._dynamo.config
    needed = blocks + 8
    if cfg.recompile_limit < needed:
        cfg.recompile_limit = needed
    if cfg.accumulated_recompile_limit < needed * 4:
        cfg.accumulated_recompile_limit = needed * 4


def _stable_repr(v: Any) -> str:
    """repr() that does not depend on hash randomization (sets, dicts)."""
    if isinstance(v, set | frozenset):
        return "{" + ",".join(sorted(_stable_repr(x) for x in v)) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(sorted(f"{_stable_repr(k)}:{_stable_repr(x)}" for k, x in v.items())) + "}"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_stable_repr(x) for x in v) + "]"
    return repr(v)


# ---------------------------------------------------------------- capture


class Capture:
    """What one region's compile produced: Mega-Cache bytes and binaries."""

    def __init__(self) -> None:
        self.mega_cache: bytes = b""
        self.binaries: dict[str, bytes] = {}  # cache-dir-relative path -> bytes
        self.torch_keys: dict[str, list[str]] = {}


def _clear_cpp_memory_caches() -> None:
    from torch._inductor import codecache

    for cls in (codecache.CppCodeCache, codecache.CppPythonBindingsCodeCache,
                codecache.CppWrapperCodeCache):
        cls.cache.clear()


@contextlib.contextmanager
def record_loaded_libraries() -> Iterator[list[str]]:
    """Notes, as cache-dir-relative paths, every compiled C++ library
    Inductor loads inside the block (clearing its in-process library caches
    first, so a library already loaded is loaded — and noted — again)."""
    from torch._inductor import codecache

    loaded: list[str] = []
    original = codecache.CppCodeCache._load_library.__func__

    def recording_load(cls, path, key):
        loaded.append(path)
        return original(cls, path, key)

    _clear_cpp_memory_caches()
    codecache.CppCodeCache._load_library = classmethod(recording_load)
    relative: list[str] = []
    try:
        yield relative
    finally:
        codecache.CppCodeCache._load_library = classmethod(original)
        root = inductor_cache_dir().resolve()
        for path in dict.fromkeys(loaded):
            p = pathlib.Path(path).resolve()
            try:
                relative.append(str(p.relative_to(root)))
            except ValueError:
                continue  # outside the cache dir: not produced by this compile


@contextlib.contextmanager
def capture_region() -> Iterator[Capture]:
    """Records everything one region's compile produces.

    Inside the block, every PyTorch cache artifact created goes to a fresh
    Mega-Cache recording, and every compiled C++ library loaded is noted.
    In-process caches of compiled libraries are cleared first, so a kernel
    this region shares with an earlier one is loaded (and so recorded) again
    rather than silently reused.
    """
    from torch.compiler._cache import CacheArtifactManager

    cap = Capture()
    with record_loaded_libraries() as libraries:
        with CacheArtifactManager.with_fresh_cache():
            yield cap
            result = torch.compiler.save_cache_artifacts()
        if result is not None:
            cap.mega_cache, info = result
            cap.torch_keys = {k: list(v) for k, v in info.artifacts.items()}
    root = inductor_cache_dir()
    for rel in libraries:
        cap.binaries[rel] = (root / rel).read_bytes()


# ---------------------------------------------------------------- restore


def restore_region(mega_cache: bytes, binaries: dict[str, bytes]) -> None:
    """Puts a captured region back where PyTorch will find it.

    Binaries go first, at their cache-dir-relative paths (named by a hash of
    their source and flags, so identical kernels land on identical names), via
    a temp file and rename so a concurrent reader never sees a partial file.
    Then the Mega-Cache bytes populate the FX-graph and AOTAutograd caches.
    """
    root = inductor_cache_dir().resolve()
    for rel, data in binaries.items():
        dest = (root / rel).resolve()
        if root not in dest.parents:
            raise ValueError(f"bundle binary path escapes the cache dir: {rel!r}")
        if dest.exists() and dest.read_bytes() == data:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
    if mega_cache:
        torch.compiler.load_cache_artifacts(mega_cache)


# ---------------------------------------------------------------- target


def cpu_vec_isa() -> str:
    """The vector ISA Inductor generates CPU code for here ("avx512", "avx2", …)."""
    from torch._inductor import cpu_vec_isa as isa

    picked = isa.pick_vec_isa()
    return str(picked) if picked else "novec"


def isa_checks_done() -> bool:
    """Whether Inductor already decided its valid vector ISAs in this process."""
    from torch._inductor import cpu_vec_isa as isa

    return isa.valid_vec_isa_list.cache_info().currsize > 0


@contextlib.contextmanager
def isa_checks(known: dict[str, bool]):
    """Inductor's per-ISA checks (VecISA.check_build: build a probe library
    with the ISA's flags, dlopen it in a child Python) answered from
    `known` where it holds the answer for that ISA class, flags and probe
    source, and run for real otherwise. Yields a dict of every answer given
    inside, for the node to remember. Inductor caches each ISA's verdict
    for the process, so answering once is enough.
    """
    from torch._inductor import cpu_vec_isa as isa

    real = isa.VecISA.check_build
    answers: dict[str, bool] = {}

    def check_build(self, code: str) -> bool:
        name = "|".join((type(self).__name__, self.build_arch_flags(),
                         hashlib.sha256(code.encode()).hexdigest()[:16]))
        if name not in answers:
            answers[name] = known[name] if isinstance(known.get(name), bool) \
                else bool(real(self, code))
        return answers[name]

    isa.VecISA.check_build = check_build
    try:
        yield answers
    finally:
        isa.VecISA.check_build = real


def isa_probe_binaries() -> dict[str, bytes]:
    """The ISA probe libraries Inductor built in its cache directory.

    pick_vec_isa() compiles a tiny *_chk_kernel program per candidate ISA
    (about 10 s on 2 cores) once per Inductor cache directory, then runs
    each to check this CPU. The binaries depend only on the compiler and
    its flags, so kcache ships them: a fresh node then only runs the checks.
    """
    root = inductor_cache_dir()
    found: dict[str, bytes] = {}
    for so in root.glob("*/*.so"):
        src = so.with_suffix(".cpp")
        try:
            if "_chk_kernel" in src.read_text(errors="replace"):
                found[str(so.relative_to(root))] = so.read_bytes()
        except OSError:
            continue
    return found


def host_compiler() -> str:
    """Inductor's C++ compiler command (it honours CXX)."""
    from torch._inductor.cpp_builder import get_cpp_compiler

    return get_cpp_compiler()


# ---------------------------------------------------------------- AOTInductor


def aoti_compile_package(exported, package_path: str) -> str:
    """Compiles a torch.export program into an AOTInductor package (.pt2)
    whose weights are not baked in: the loader binds each block's own
    tensors (update_constant_buffer / load_constants).

    AOTInductor writes the host's ISA into the global
    inductor config aot_inductor.metadata and leaves it there; that entry is
    part of every later key's config hash, so it is restored here.
    """
    with torch._inductor.config.patch({"aot_inductor.metadata": dict(
            torch._inductor.config.aot_inductor.metadata)}):
        return torch._inductor.aoti_compile_and_package(
            exported, package_path=package_path,
            inductor_configs={"aot_inductor.package_constants_in_so": False})


def aoti_load_package(package_path: str):
    """PyTorch's Python loader for a .pt2 package (tests, the Python reference run)."""
    return torch._inductor.aoti_load_package(package_path)


# ---------------------------------------------------------------- GPU kernels


def triton_cubins(mega_cache: bytes) -> dict[str, bytes]:
    """The Triton cubins inside Mega-Cache bytes, as {"<kernel hash>/<file>": bytes}.

    On GPU, Inductor bundles each graph's compiled Triton kernels into its
    FX-graph cache entry (config.bundle_triton_into_fx_graph_cache, on by
    default): the cubins a restore installs travel inside the Mega-Cache, so
    the bundle's manifest lists them from here (docs/artifact.md). Without
    CUDA there are none, and nothing is unpickled. Every failure (bytes that
    do not deserialize, an entry that does not unpickle) costs only the
    listing, with a warning: never the region's compile.
    """
    import pickle

    from torch.compiler._cache import CacheArtifactManager

    found: dict[str, bytes] = {}
    if not mega_cache or not torch.cuda.is_available():
        return found
    log = logging.getLogger("kcache")
    try:  # deserialize() logs and returns None for bytes it cannot read
        artifacts = (CacheArtifactManager.deserialize(mega_cache) or {}).get("inductor", [])
    except Exception as e:  # noqa: BLE001 - a listing gap must not fail the compile
        artifacts = []
        log.warning("kcache: cannot read the Mega-Cache to list its cubins (%s); the bundle's "
                    "manifest will not list them", e)
    for artifact in artifacts:
        try:
            entry = pickle.loads(artifact.content)
            bundle = getattr(entry, "_triton_bundle", None)
            cubins = {f"{kernel.kernel_hash}/{file.filename}": file.payload
                      for kernel in getattr(bundle, "kernel_artifacts", None) or []
                      for file in kernel.artifacts if file.filename.endswith(".cubin")}
        except Exception as e:  # noqa: BLE001 - a listing gap must not fail the compile
            log.warning(
                "kcache: cannot list the cubins of FX entry %s (%s); the bundle's "
                "manifest will not list them", getattr(artifact, "key", "?"), e)
            continue
        found.update(cubins)
    return found


# ---------------------------------------------------------------- precompiled regions
#
# torch.compile(fn, fullgraph=True).aot_compile(((args), {kwargs})) returns
# an AOTCompiledFunction: Dynamo's transformed bytecode, its guards
# (serializable ones only: global guards and identity guards are dropped by
# PyTorch on this path) and the bundled AOTAutograd entry holding Inductor's
# compiled graphs (the backward lowered eagerly). Loading it runs no Dynamo,
# no AOTAutograd and no Inductor code generation.


def _precompile_required() -> dict[str, bool]:
    from torch._dynamo import aot_compile, guards, package, pgo

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
    """
    from torch._dynamo.guards import CheckFunctionManager

    unsupported = CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES
    return [g.guard_type not in unsupported
            and (not g.is_global or g.name.startswith("G['__import_")) for g in entries]


class PrecompileUnsupported(RuntimeError):
    """Dynamo cannot produce a serializable function for this region (a graph
    break, a guard or global that does not serialize, an unsupported construct)."""


def aot_compile_call(call, args: tuple, kwargs: dict, mode: str | None,
                     options: dict[str, Any] | None, dynamic: bool | None):
    """Dynamo + AOTAutograd + Inductor on `call(*args, **kwargs)`, whole-graph,
    returning PyTorch's AOTCompiledFunction; PrecompileUnsupported when the
    region cannot take this path (the message says why)."""
    patches = inductor_config_patches(mode, options, dynamic)
    _forget_automatic_dynamic(call)
    compiled = torch.compile(call, fullgraph=True, backend="inductor", dynamic=dynamic,
                             options={**patches, "guard_filter_fn": keep_serializable_guards})
    try:
        return compiled.aot_compile((tuple(args), dict(kwargs)))
    except Exception as e:  # noqa: BLE001 - every failure is a reason to fall back
        raise PrecompileUnsupported(_first_line(e)) from e


def _forget_automatic_dynamic(fn) -> None:
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
    from . import _torch_adaptor_imports

    return _torch_adaptor_imports.extern_kernel_table()


def compiler_modules_imported() -> list[str]:
    """Which of Inductor's compiler modules this process has imported (a
    warm process on precompiled regions imports none: tests and the demo
    job report it)."""
    from . import _torch_adaptor_imports

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

    from ._torch_adaptor_imports import light_imports

    try:
        with light_imports(extern_kernels), without_header_precompiling():
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



# A block compiled in place runs through `_compiled_call_impl`, which
# nn.Module.__call__ runs instead of `_call_impl` (nn.Module.compile()).
# kcache's precompiled function for it is compiled from `_call_impl`, with
# the hooks the block had then; a block with hooks (fully_shard's, ZeRO-3's)
# takes the traced path instead (kcache.precompiled_in_place).
_MODULE_HOOKS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks",
                 "_forward_hooks_with_kwargs", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs")
_GLOBAL_HOOKS = ("_global_backward_pre_hooks", "_global_backward_hooks",
                 "_global_forward_hooks", "_global_forward_pre_hooks")


def module_hooks(module: torch.nn.Module) -> list[str]:
    """The kinds of hooks a call of `module` runs: its own and the global ones."""
    from torch.nn.modules import module as nn_module

    return [h for h in _MODULE_HOOKS if getattr(module, h, None)] + \
        [h for h in _GLOBAL_HOOKS if getattr(nn_module, h, None)]


def _module_hooks_required() -> dict[str, bool]:
    import inspect

    from torch.nn.modules import module as nn_module

    probe = torch.nn.Module()
    return {"torch.nn.Module hook dicts (" + ", ".join(_MODULE_HOOKS) + ")":
            all(isinstance(getattr(probe, h, None), dict) for h in _MODULE_HOOKS),
            "torch.nn.modules.module global hook dicts": all(
                isinstance(getattr(nn_module, h, None), dict) for h in _GLOBAL_HOOKS),
            "torch.nn.Module._wrapped_call_impl runs _compiled_call_impl":
            "self._compiled_call_impl(" in inspect.getsource(torch.nn.Module._wrapped_call_impl)}
