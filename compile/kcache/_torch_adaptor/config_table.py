"""Every entry of the configs a compile reads, each classified: what kcache
does with it (docs/keys.md, "Compiler configuration").

Classes:
- "key": in the key's config fingerprint (config_key.py) and carried to
  the compile worker (config_key.config_snapshot). Its reason says why:
  "portable" where PyTorch's own cache-key view of the config
  (save_config_portable) holds it; "kcache" where PyTorch leaves it out of
  that view but it can change what a compile produces (custom passes, the
  private switches training frameworks set: `_micro_pipeline_tp`, ...):
  kcache keys those itself, by value when set (a callable by its uuid(),
  as PyTorch's FX-graph cache keys a pass; none refuses the region).
- "neutral": cannot change what a compile produces (the reason says why):
  neither in the key nor carried.
- "alias": another name of an entry classified where it lives.

A torch release that adds an entry PyTorch keeps out of its cache-key view
gets no class here until someone decides it: unclassified() names it, and
tests/python/compile/test_config_table.py fails. Entries in that view are
keyed without a decision (the safe side: a spurious miss, never a false hit).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

# short name -> module; the first three are the ones keys held before
# 2026-12-07 (their portable entries hash as they always did).
MODULES = {
    "inductor": "torch._inductor.config",
    "functorch": "torch._functorch.config",
    "dynamo": "torch._dynamo.config",
    "fx": "torch.fx.experimental._config",
    "comms": "torch._inductor.config_comms",
    "compiler": "torch.compiler.config",
}
LEGACY = ("inductor", "functorch", "dynamo")

_CACHES = "which of PyTorch's caches are used, not what they hold"
_RECOMPILES = "how often Dynamo recompiles, not what one compile produces (kcache raises the limit)"
_PATH = "an absolute path, different between checkouts and ranks"
_BOOKKEEPING = ("the config module's own lists of which entries its serializers skip "
                "(kcache reads PyTorch's portable view with their defaults: an edit hides nothing)")
_LOAD_TIME = "applied when a compiled graph is loaded, under the loading process's own setting"
_WORKERS = "how many processes compile and how they start, not what they produce"

# Entries that cannot change generated code, by kcache's decision.
NEUTRAL: dict[str, dict[str, str]] = {
    "inductor": {
        "fx_graph_cache": _CACHES, "fx_graph_remote_cache": _CACHES,
        "autotune_local_cache": _CACHES, "autotune_remote_cache": _CACHES,
        "cudagraph_policy": _LOAD_TIME, "force_disable_cudagraph_TESTING_ONLY": _LOAD_TIME,
        "worker_start_method": _WORKERS, "compile_threads": _WORKERS,
        "compile_worker_mode": _WORKERS, "compile_worker_watchdog_interval_seconds": _WORKERS,
        "cutlass.cutlass_dir": _PATH, "cuda.cutlass_dir": _PATH, "xpu.cutlass_dir": _PATH,
        "cpp.cxx": "the host compiler's path (its identity is the key's toolchain field)",
        "pre_grad_pass_timing": "when the pre-grad pass runs around PyTorch's cache lookup; "
                                "the pass itself is keyed by its uuid()",
        "_save_config_ignore": _BOOKKEEPING, "_cache_config_ignore_prefix": _BOOKKEEPING,
        "_cache_config_factory_keys": _BOOKKEEPING,
    },
    "dynamo": {
        "recompile_limit": _RECOMPILES, "accumulated_recompile_limit": _RECOMPILES,
        "base_dir": _PATH, "debug_dir_root": _PATH, "_save_config_ignore": _BOOKKEEPING,
    },
    "functorch": {
        "error_on_custom_op_aliasing": "picks an error over a warning; torch defaults it from $CI",
        "_save_config_ignore": _BOOKKEEPING,
    },
    "compiler": {
        "job_id": "names the job's profile in PyTorch's profile-guided store; the shapes it makes "
                  "dynamic are in the traced graph and the call's key",
        "pgo_extra_read_key": "an extra name PyTorch's profile-guided store reads; what it makes "
                              "dynamic is in the traced graph and the call's key",
        "pgo_extra_write_key": "an extra name PyTorch's profile-guided store writes under",
        "force_disable_caches": _CACHES, "force_cudagraph_gc": _LOAD_TIME,
    },
}
# The entries of PyTorch's portable view (LEGACY modules) that kcache has
# always left out of the hash; every other portable entry is hashed, whatever
# NEUTRAL says of it in another release (torch 2.14's
# compile_worker_watchdog_interval_seconds): changing this set moves keys.
PORTABLE_NEUTRAL: dict[str, frozenset[str]] = {
    "inductor": frozenset({"cpp.cxx"}),
    "dynamo": frozenset({"recompile_limit", "accumulated_recompile_limit", "base_dir", "debug_dir_root"}),
    "functorch": frozenset({"error_on_custom_op_aliasing"}),
}
# Whole families, by prefix.
NEUTRAL_PREFIXES: dict[str, dict[str, str]] = {
    "inductor": {"trace.": "debug output written beside a compile (PyTorch leaves trace.* out of its keys)"},
}
# Entries PyTorch keeps out of its cache-key view that kcache keys (when set).
KEYED: dict[str, dict[str, str]] = {
    "inductor": {
        "post_grad_custom_pre_pass": "custom pass, by uuid()",
        "post_grad_custom_post_pass": "custom pass, by uuid()",
        "joint_custom_pre_pass": "custom pass, by uuid()",
        "joint_custom_post_pass": "custom pass, by uuid()",
        "pre_grad_custom_pass": "custom pass, by uuid()",
        "_pre_fusion_custom_pass": "scheduler pass, by name or uuid()",
        "_post_fusion_custom_pass": "scheduler pass, by name or uuid()",
        "_fuse_ddp_communication_passes": "DDP fusion passes, by name or uuid()",
        "_fuse_ddp_communication": "fuses DDP's communication into the graph",
        "_fuse_ddp_bucket_size": "DDP fusion's bucket size",
        "_micro_pipeline_tp": "async tensor parallelism (torchtitan)",
        "_collective.auto_select": "collective lowering",
        "_collective.one_shot_all_reduce_threshold_bytes": "collective lowering",
        "_conv_default_backends": "convolution lowering",
        "_realize_opcount_threshold_default": "fusion decisions",
        "_realize_acc_reads_threshold_default": "fusion decisions",
        "_use_fp64_for_unbacked_floats": "generated arithmetic",
        "_raise_error_for_testing": "a compile that raises",
        "_profile_var": "profiling code in the generated kernels",
        "_partitioned_scatter_default": "scatter lowering (torch 2.14)",
    },
    "dynamo": {
        "_shapes_spec": "dynamic-shape specification",
        "_dynamic_shapes_spec": "dynamic-shape specification (torch 2.14)",
        "_autograd_backward_strict_mode_banned_ops": "what Dynamo traces",
        "_autograd_backward_strict_mode_conditional_banned_ops": "what Dynamo traces",
        "_unsafe_skip_fsdp_module_guards": "what Dynamo traces",
        "_custom_ops_profile": "custom operators' fake implementations",
    },
    "functorch": {
        "_test_disable_functionalization": "what AOTAutograd traces",
        "_sync_decision_cross_ranks": "the partitioner's decisions",
        "_sync_cache_decision_cross_ranks": "whether ranks agree on a cached result (torch 2.15)",
    },
}
# Entries that hold passes: a callable in them must have a uuid() (PyTorch's
# FX-graph cache bypasses itself for one without; kcache refuses the region).
PASS_ENTRIES: dict[str, frozenset[str]] = {
    "inductor": frozenset({
        "post_grad_custom_pre_pass", "post_grad_custom_post_pass", "joint_custom_pre_pass",
        "joint_custom_post_pass", "pre_grad_custom_pass", "custom_partitioner_fn",
        "_pre_fusion_custom_pass", "_post_fusion_custom_pass", "_fuse_ddp_communication_passes",
        "inductor_choices_class"}),
    "functorch": frozenset({
        "joint_custom_pass", "activation_memory_budget_runtime_estimator",
        "activation_memory_budget_solver"}),
}


@dataclass(frozen=True)
class Row:
    module: str  # short name (MODULES)
    name: str
    cls: str | None  # "key", "neutral", "alias"; None: unclassified
    reason: str


def config(short: str):
    return importlib.import_module(MODULES[short])


def available() -> dict[str, object]:
    """{short name: config module} of those this torch has."""
    out = {}
    for short in MODULES:
        try:
            out[short] = config(short)
        except ImportError:
            continue
    return out


def _portable_names(cfg) -> set[str]:
    from . import releases

    return set(releases.portable_config(cfg))


def rows() -> list[Row]:
    out = []
    for short, cfg in available().items():
        portable = _portable_names(cfg)
        neutral, prefixes, keyed = NEUTRAL.get(short, {}), NEUTRAL_PREFIXES.get(short, {}), KEYED.get(short, {})
        for name, entry in cfg._config.items():
            prefix = next((p for p in prefixes if name.startswith(p)), None)
            if getattr(entry, "alias", None):
                row = Row(short, name, "alias", f"same entry as {entry.alias}")
            elif short in LEGACY and name in portable and name not in PORTABLE_NEUTRAL.get(short, ()):
                # hashed as it always was: a decision here would move keys
                row = Row(short, name, "key", "portable")
            elif name in neutral:
                row = Row(short, name, "neutral", neutral[name])
            elif prefix is not None:
                row = Row(short, name, "neutral", prefixes[prefix])
            elif name in keyed:
                row = Row(short, name, "key", f"kcache: {keyed[name]}")
            elif name in portable:
                row = Row(short, name, "key", "portable")
            else:
                row = Row(short, name, None, "PyTorch keeps it out of its cache keys; kcache has not decided")
            out.append(row)
    return out


def unclassified() -> list[str]:
    return [f"{r.module}.{r.name}" for r in rows() if r.cls is None]


def keyed_beyond_portable() -> dict[str, list[str]]:
    """{short name: entries keyed (when set) beyond PyTorch's portable
    view}: KEYED's, and every entry of the modules outside LEGACY."""
    out: dict[str, list[str]] = {}
    for r in rows():
        if r.cls == "key" and (r.module not in LEGACY or r.reason != "portable"):
            out.setdefault(r.module, []).append(r.name)
    return out
