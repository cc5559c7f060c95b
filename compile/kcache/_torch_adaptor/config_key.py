"""The compiler configuration as it enters kcache's keys and reaches the
compile worker, and Dynamo's recompile limit raised so that every block is
traced. Which entries count is config_table.py's; the process-global flags
(matmul precision, deterministic algorithms) are global_flags.py's."""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import marshal
import types
from typing import Any

import torch

from . import config_state, config_table, global_flags, releases


class NotKeyable(Exception):
    """A setting kcache cannot key (a custom pass without uuid(), an object
    with no stable identity): the region is neither stored nor fetched."""


# (the configuration's state, its fingerprint or NotKeyable) when last computed
_last: list = [None, None]


def config_fingerprint() -> str:
    """Hash of every config entry that can change a compile (config_table)
    and of the process-global flags, recomputed only when the configs have
    changed (config_state.py); NotKeyable where one cannot be keyed."""
    configs = tuple(config_table.available().values())
    now = config_state.state(configs, _stable_repr)
    if not config_state.same(now, _last[0]):
        try:
            part: Any = _fingerprint()
        except NotKeyable as e:
            part = e
        _last[:] = [now, part]
    part = _last[1]
    if isinstance(part, NotKeyable):
        raise part
    flags = global_flags.key_part()
    if not flags:
        return part
    return hashlib.sha256(repr((part, flags)).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _beyond() -> tuple[tuple[str, str], ...]:
    return tuple((short, name) for short, names in config_table.keyed_beyond_portable().items()
                 for name in names)


def _set_beyond() -> list[tuple[str, str, Any]]:
    """(module, entry, value) of the entries keyed beyond PyTorch's portable
    view whose value is not their default: only those enter the hash, so a
    job that sets none of them keeps the keys it had before they counted."""
    mods = config_table.available()
    out = []
    for short, name in _beyond():
        value = getattr(mods[short], name)
        if not _is_default(mods[short], name, value):  # one that does not compare counts as set
            out.append((short, name, value))
    return out


# The lists that decide what PyTorch's portable view holds: read with their
# defaults, so that a job that edits them hides no entry from the key.
_VIEW_LISTS = ("_cache_config_ignore_prefix", "_cache_config_factory_keys")


def _legacy_items(short: str, cfg) -> list[tuple[str, Any]]:
    left_out = config_table.PORTABLE_NEUTRAL.get(short, ())
    edited = {name: copy.deepcopy(cfg._config[name].default) for name in _VIEW_LISTS
              if name in cfg._config and not _is_default(cfg, name, getattr(cfg, name))}
    with cfg.patch(edited) if edited else contextlib.nullcontext():
        portable = releases.portable_config(cfg)
    return [(k, v) for k, v in portable.items() if k not in left_out]


def _fingerprint() -> str:
    mods = config_table.available()
    h = hashlib.sha256()
    for short in config_table.LEGACY:
        # save_config_portable() drops fields marked as irrelevant to caching.
        items = sorted((k, _text(v, short, k)) for k, v in _legacy_items(short, mods[short]))
        h.update(repr(items).encode())
    extra = sorted((f"{short}.{name}", _text(value, short, name)) for short, name, value in _set_beyond())
    if extra:
        h.update(repr(extra).encode())
    return h.hexdigest()[:16]


def code_digest(code: types.CodeType) -> str:
    """A function's code as a digest that is the same in every process (its
    bytecode, names and constants, nested code included; not its file)."""
    return hashlib.sha256(marshal.dumps(code.co_code) + repr(
        (code.co_names, [c if not isinstance(c, types.CodeType) else code_digest(c) for c in code.co_consts])
    ).encode()).hexdigest()[:16]


def _text(v: Any, short: str, name: str) -> str:
    """An entry's value as text that is the same in every process: a pass
    by its uuid() (none: NotKeyable, for the entries that hold passes), a
    function by its qualified name and code, a class by its name."""
    if isinstance(v, str | bytes | int | float | bool | type(None)):
        return repr(v)
    if isinstance(v, set | frozenset):
        return "{" + ",".join(sorted(_text(x, short, name) for x in v)) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(sorted(f"{_text(k, short, name)}:{_text(x, short, name)}" for k, x in v.items())) + "}"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_text(x, short, name) for x in v) + "]"
    uuid = getattr(v, "uuid", None)
    if callable(uuid) and not isinstance(v, type):
        got = uuid()
        if got is None:
            raise NotKeyable(f"{short}.{name} holds {type(v).__qualname__}, whose uuid() is None")
        return f"uuid:{got!r}"
    if name in config_table.PASS_ENTRIES.get(short, ()):
        raise NotKeyable(f"{short}.{name} holds {getattr(v, '__qualname__', type(v).__qualname__)}, "
                         "a pass without uuid() (PyTorch's FX-graph cache bypasses itself for it too)")
    if isinstance(v, type):
        return f"class:{v.__module__}.{v.__qualname__}"
    if isinstance(v, types.MethodType):
        return f"method:{_text(v.__func__, short, name)}"
    if isinstance(v, types.FunctionType):
        return f"fn:{v.__module__}.{v.__qualname__}:{code_digest(v.__code__)}:{_text(v.__defaults__, short, name)}"
    text = repr(v)
    if " at 0x" in text or " object at " in text:
        raise NotKeyable(f"{short}.{name} holds {type(v).__qualname__}, which has no stable identity to key")
    return text


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
    """repr() that does not depend on hash randomization (sets, dicts):
    the change detector's text (config_state.py)."""
    if isinstance(v, set | frozenset):
        return "{" + ",".join(sorted(_stable_repr(x) for x in v)) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(sorted(f"{_stable_repr(k)}:{_stable_repr(x)}" for k, x in v.items())) + "}"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_stable_repr(x) for x in v) + "]"
    return repr(v)


class NotCarried(Exception):
    """A keyed setting that does not pickle: the worker could not compile
    under it (the block compiles on the training thread)."""


def config_snapshot() -> dict[str, dict[str, Any]]:
    """Every keyed entry (what config_fingerprint hashes) as values another
    process can apply (config_restore): a compile worker builds under the
    job's settings. Passes and other objects go by pickle, that is by
    reference to their class (importable in the worker). A set entry that
    does not pickle raises NotCarried; a default one is left out (the
    worker has it)."""
    import pickle

    mods = config_table.available()
    out: dict[str, dict[str, Any]] = {short: {} for short in mods}
    # A factory entry (inductor_choices_class) is its uuid() in the portable
    # view: the worker gets the live value.
    entries = [(short, k, getattr(mods[short], k) if k in getattr(mods[short], "_cache_config_factory_keys", ()) else v)
               for short in config_table.LEGACY for k, v in _legacy_items(short, mods[short])]
    for short, name, value in entries + _set_beyond():
        try:
            pickle.dumps(value)
        except Exception as e:  # noqa: BLE001 - callables, modules
            if _is_default(mods[short], name, value):
                continue
            raise NotCarried(f"config {short}.{name} ({type(value).__qualname__}) does not pickle "
                             f"({type(e).__name__}: {e})") from None
        out[short][name] = value
    return out


def _is_default(cfg, name: str, value: Any) -> bool:
    try:
        return bool(value == cfg._config[name].default)
    except Exception:  # noqa: BLE001
        return False


def config_restore(snapshot: dict[str, dict[str, Any]]) -> list[str]:
    """Applies config_snapshot()'s values here; the names that could not be
    set (a config another torch does not have). Entries keyed beyond the
    portable view that the snapshot does not name are set back to their
    default (a worker's previous job may have set them)."""
    import warnings

    failed = []
    mods = config_table.available()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated entries, read and set back
        for short, name in _beyond():
            if name not in snapshot.get(short, {}) and short in mods:
                cfg, default = mods[short], mods[short]._config[name].default
                if not _is_default(cfg, name, getattr(cfg, name)):
                    setattr(cfg, name, copy.deepcopy(default))
        for short, values in snapshot.items():
            cfg = mods.get(short)
            for k, v in values.items():
                try:
                    if cfg is None:
                        raise KeyError(short)
                    if getattr(cfg, k) != v:
                        setattr(cfg, k, v)
                except Exception:  # noqa: BLE001 - reported to the caller
                    failed.append(f"{short}.{k}")
    return failed
