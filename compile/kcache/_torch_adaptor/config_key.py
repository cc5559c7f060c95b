"""The compiler configuration as it enters kcache's keys, and Dynamo's
recompile limit raised so that every block is traced."""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from . import config_state, releases


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


# (the configuration's state, its fingerprint) when last computed
_last: list = [None, None]


def config_fingerprint() -> str:
    """Hash of the Inductor, functorch and Dynamo configs that shape code,
    recomputed only when they have changed (config_state.py)."""
    configs = (torch._inductor.config, torch._functorch.config, torch._dynamo.config)
    now = config_state.state(configs, _stable_repr)
    if config_state.same(now, _last[0]):
        return _last[1]
    fingerprint = _fingerprint(configs)
    _last[:] = [now, fingerprint]
    return fingerprint


def _fingerprint(configs: tuple) -> str:
    h = hashlib.sha256()
    for cfg in configs:
        # save_config_portable() drops fields marked as irrelevant to caching.
        portable = releases.portable_config(cfg)
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
    if not hasattr(cfg, "recompile_limit") or not hasattr(cfg, "accumulated_recompile_limit"):
        return  # a torch without them (support() says what kcache does there)
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


def _configs() -> dict[str, Any]:
    return {"inductor": torch._inductor.config, "functorch": torch._functorch.config,
            "dynamo": torch._dynamo.config}


def config_snapshot() -> dict[str, dict[str, Any]]:
    """The code-shaping configs (what config_fingerprint hashes) as plain
    values another process can apply (config_restore): a compile worker
    builds under the job's settings. Entries that do not pickle are left
    out; the worker's key, compared with the job's, catches any that
    mattered."""
    import pickle

    out: dict[str, dict[str, Any]] = {}
    for name, cfg in _configs().items():
        kept = {}
        for k, v in releases.portable_config(cfg).items():
            if k in _NEUTRAL_CONFIG:
                continue
            try:
                pickle.dumps(v)
            except Exception:  # noqa: BLE001 - callables, modules: left out
                continue
            kept[k] = v
        out[name] = kept
    return out


def config_restore(snapshot: dict[str, dict[str, Any]]) -> list[str]:
    """Applies config_snapshot()'s values here; the names that could not be
    set (a config another torch does not have)."""
    import warnings

    failed = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated entries, read and set back
        for name, cfg in _configs().items():
            for k, v in snapshot.get(name, {}).items():
                try:
                    if getattr(cfg, k) != v:
                        setattr(cfg, k, v)
                except Exception:  # noqa: BLE001 - reported to the caller
                    failed.append(f"{name}.{k}")
    return failed
