"""Which environment variables change what PyTorch compiles.

Every variable a job might set is declared here as key-relevant (it goes
into the key's "env" field) or neutral (it does not change generated code,
so it must not split the cache). Prefix rules cover families; an explicit
entry wins over a prefix. Unknown TORCHINDUCTOR_* / TORCH_COMPILE_* /
TRITON_* variables count as relevant: a spurious miss is cheaper than a
false hit.
"""

from __future__ import annotations

import json
import os

RELEVANT = {
    "OMP_NUM_THREADS",  # Inductor's CPU code bakes parallel chunking decisions
    "MKL_NUM_THREADS",
    "TORCHINDUCTOR_MAX_AUTOTUNE",
    "TORCHINDUCTOR_FREEZING",
    "TORCHINDUCTOR_CPP_MARCH",
    "TORCHINDUCTOR_CPP_SIMDLEN",
    "TORCH_COMPILE_DEBUG",
    "CXX",  # a different host compiler makes different binaries
    "CUDA_VISIBLE_DEVICES",  # see docs/keys.md: device indices
    "TRITON_PTXAS_PATH",
}

NEUTRAL = {
    # Where caches live, logging and observability: no effect on code.
    "TORCHINDUCTOR_CACHE_DIR",
    "TORCHINDUCTOR_FX_GRAPH_CACHE",
    "TORCHINDUCTOR_AUTOGRAD_CACHE",
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE",
    "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE",
    "TORCHINDUCTOR_REDIS_HOST",
    "TORCHINDUCTOR_REDIS_PORT",
    "TORCHINDUCTOR_COMPILE_THREADS",
    "TORCHINDUCTOR_WORKER_START",
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
    "TORCH_COMPILE_CPROFILE",
    "TORCH_LOGS",
    "TORCH_TRACE",
    "TRITON_CACHE_DIR",
    "TRITON_REDIS_HOST",
    "TRITON_REDIS_PORT",
}

RELEVANT_PREFIXES = ("TORCHINDUCTOR_", "TORCH_COMPILE_", "TRITON_", "TORCHDYNAMO_")


def is_relevant(name: str) -> bool:
    if name in RELEVANT:
        return True
    if name in NEUTRAL or name.startswith("KCACHE_"):
        return False
    return name.startswith(RELEVANT_PREFIXES)


def env_field(environ: dict[str, str] | None = None) -> str:
    """Canonical JSON of the key-relevant variables that are set."""
    environ = dict(os.environ if environ is None else environ)
    picked = {k: v for k, v in environ.items() if is_relevant(k)}
    return json.dumps(picked, sort_keys=True, separators=(",", ":"))
