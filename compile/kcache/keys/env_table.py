"""Which environment variables change what PyTorch compiles.

Every variable PyTorch's compile path reads is declared here: key-relevant
(it goes into the key's "env" field) or neutral (it cannot change generated
code, so it must not split the cache), by name or by a declared family
prefix. An explicit name wins over a prefix. Within the compiler's own
families (TORCHINDUCTOR_*, TORCH_COMPILE_*, TORCHDYNAMO_*, TRITON_* …) an
undeclared name counts as relevant: a spurious miss costs one compile, a
false hit loads wrong code. tests/python/compile/test_env_table.py records every
variable `import torch` plus a compile reads and fails on any name this
table does not classify, so a new torch release cannot slip one past.
"""

from __future__ import annotations

import json
import os

RELEVANT = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS",  # Inductor's CPU code bakes thread counts
    "ATEN_CPU_CAPABILITY",  # caps the vector ISA Inductor picks
    "CXX",  # a different host compiler makes different binaries
    "TORCH_INDUCTOR_INSTALL_GXX",
    "TENSORIFY_PYTHON_SCALARS", "FAKE_ALLOW_META", "FX_PATCH_GETITEM",
    "PARTITIONER_MEMORY_BUDGET_PARETO", "UNSAFE_SKIP_FSDP_MODULE_GUARDS",
    "CUTLASS_EPILOGUE_FUSION", "ENABLE_PERSISTENT_TMA_MATMUL", "ENABLE_TEMPLATE_TMA_STORE",
    "ENABLE_TMA_LOAD_FOR_TEMPLATE_EPILOGUE", "CUTEDSL_ENABLE_AUTOTUNING",
    "PYTORCH_REORDER_COLLECTIVES_LIMIT", "PYTORCH_SINK_WAITS_LIMIT",
})

NEUTRAL = frozenset({
    # Where caches and logs live, remote-cache switches, timeouts, worker pools.
    "TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT",
    "TORCHINDUCTOR_AUTOGRAD_CACHE", "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE",
    "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE", "TORCHINDUCTOR_NON_BLOCKING_REMOTE_CACHE_WRITE",
    "TORCHINDUCTOR_REDIS_HOST", "TORCHINDUCTOR_REDIS_PORT", "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
    "TORCHINDUCTOR_CACHE_DUMP_FILE_PATH", "TORCHINDUCTOR_DUMP_MEMOIZER_CACHE",
    "TORCHINDUCTOR_COMPILE_THREADS", "TORCHINDUCTOR_WORKER_START", "TORCHINDUCTOR_WORKER_LOGPATH",
    "TORCHINDUCTOR_WORKER_SUPPRESS_LOGGING", "TORCHINDUCTOR_FILE_LOCK_TIMEOUT",
    "TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL", "TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT",
    "TORCHINDUCTOR_AUTOTUNE_POOL_INACTIVITY_TIMEOUT", "TORCHINDUCTOR_PRECOMPILATION_TIMEOUT_SECONDS",
    "TORCHINDUCTOR_AUTOTUNE_NUM_CHOICES_DISPLAYED", "TORCHINDUCTOR_PROFILE_OUTPUT",
    "TORCHINDUCTOR_TRITON_PROTON_OUTPUT_DIR", "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH",
    "TORCHINDUCTOR_ENABLED_METRIC_TABLES", "TORCHINDUCTOR_WRITE_MISSING_OPS",
    "TORCH_COMPILE_JOB_ID", "TORCH_COMPILE_CPROFILE", "TORCH_COMPILE_DEBUG_DIR",
    "TORCH_COMPILE_STICKY_PGO_KEY", "TORCH_COMPILE_STICKY_PGO_READ", "TORCH_COMPILE_STICKY_PGO_WRITE",
    "TORCH_COMPILE_STROBELIGHT", "TORCH_COMPILE_DYNAMO_PROFILER", "TORCH_COMPILE_GRAPH_FORMAT",
    "TORCH_COMPILE_REPLAY_RECORD",
    "TORCH_LOGS", "TORCH_LOGS_FORMAT", "TORCH_LOGS_OUT", "TORCH_LOGS_TRACE_ID_FILTER",
    "TORCH_TRACE", "TORCH_DTRACE", "TORCH_CUSTOM_PYTHONPATH", "TORCH_ENRICH_RPOFILER_STACK_TRACE",
    "TORCH_DEVICE_BACKEND_AUTOLOAD", "TORCH_USE_RTLD_GLOBAL", "TORCH_CUDA_SANITIZER",
    "TORCHDYNAMO_VERBOSE", "TORCHDYNAMO_DEBUG_FUNCTION", "TORCHDYNAMO_EXTENDED_DEBUG_CPP",
    "TORCHDYNAMO_EXTENDED_DEBUG_CREATE_SYMBOL", "TORCHDYNAMO_EXTENDED_DEBUG_GUARD_ADDED",
    "TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_FORWARD_ONLY", "TORCHDYNAMO_REPRO_IGNORE_NON_FP",
    "TORCHDYNAMO_REPRO_LEVEL", "TORCHEXPORT_EXTENDED_DEBUG_CURRENT_LOC",
    "TRITON_CACHE_DIR", "TRITON_REDIS_HOST", "TRITON_REDIS_PORT",
    "PT2_COMPILE_ID_PREFIX", "MAST_HPC_JOB_NAME", "CONTAINER_NAME", "DUMP_AOTI_MINIFIER",
    "AOT_PARTITIONER_DEBUG", "LOG_AUTOTUNE_RESULTS", "LOG_TLPARSE", "KINETO_USE_DAEMON",
    "PARTITIONER_MEMORY_BUDGET_PARETO_DIR", "CUDNN_HOME", "CUDNN_PATH", "WINDOWS_CUDA_HOME",
    "OPENBLAS_MAIN_FREE", "NPY_PROMOTION_STATE", "NVPL_BLAS_DEBUG_CPU_TYPE",
    # Set by torch itself inside the process, to an address: never a key input.
    "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR",
    # Device visibility differs per rank by design; see docs/keys.md (device indices).
    "CUDA_VISIBLE_DEVICES",
    # The process and host: shells, users, temp dirs, certificate bundles.
    "HOME", "PATH", "PWD", "OLDPWD", "SHELL", "SHLVL", "TERM", "LANG", "USER", "USERNAME",
    "LOGNAME", "LNAME", "TMP", "TEMP", "TMPDIR", "_", "CI", "IS_SANDBOX", "DEBIAN_FRONTEND",
    "DISTUTILS_DEBUG", "SETUPTOOLS_USE_DISTUTILS", "RUST_BACKTRACE", "RUSTUP_AUTO_INSTALL",
    "PYENV_ROOT", "SAGE_ROOT", "AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
    "GIT_SSL_CAINFO", "NIX_SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "HTTPLIB2_CA_CERTS",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "CLOUD_SDK_VERSION",
    "TF_CLI_CONFIG_FILE",
})

# Families of the compiler itself: undeclared members count as relevant.
RELEVANT_PREFIXES = ("TORCHINDUCTOR_", "TORCH_COMPILE_", "TORCHDYNAMO_", "TORCH_DYNAMO_",
                     "AOT_INDUCTOR_", "AOTINDUCTOR_", "TRITON_", "TORCH_", "INDUCTOR_")
# Families that cannot change generated code: libraries' own switches, debug dumps.
NEUTRAL_PREFIXES = ("KCACHE_", "CCACHE_", "PYTEST_", "SYMPY_", "MPMATH_", "NETWORKX_", "_NETWORKX", "NUMPY_", "PYTHON",
                    "_PYTHON", "PIP_", "SSL_", "FX_GRAPH_SHOW_", "FX_NET_ACC_", "PYTORCH_JIT",
                    "COMPILE_STROBELIGHT_", "INDUCTOR_ORIG_FX_", "INDUCTOR_POST_FUSION_",
                    "INDUCTOR_DOT_", "INDUCTOR_LOG_", "INDUCTOR_WRITE_", "INDUCTOR_CK_",
                    "INDUCTOR_CUDA_BACKEND_", "INDUCTOR_PROVENANCE", "PYTORCH_GEN_PATTERNS",
                    "PYTORCH_MATCHER_")


def classify(name: str) -> str | None:
    """"relevant", "neutral", or None for a name this table does not declare."""
    if name in RELEVANT:
        return "relevant"
    if name in NEUTRAL:
        return "neutral"
    # The longest matching prefix decides (INDUCTOR_ORIG_FX_ before INDUCTOR_).
    best = max((p for p in RELEVANT_PREFIXES + NEUTRAL_PREFIXES if name.startswith(p)),
               key=len, default=None)
    if best is None:
        return None
    return "neutral" if best in NEUTRAL_PREFIXES else "relevant"


def is_relevant(name: str) -> bool:
    return classify(name) == "relevant"


def env_field(environ: dict[str, str] | None = None) -> str:
    """Canonical JSON of the key-relevant variables that are set."""
    environ = dict(os.environ if environ is None else environ)
    picked = {k: v for k, v in environ.items() if is_relevant(k)}
    return json.dumps(picked, sort_keys=True, separators=(",", ":"))
