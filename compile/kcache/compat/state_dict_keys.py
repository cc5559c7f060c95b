"""Plain state-dict keys for compiled regions.

torch.compile's wrapper holds the block as its submodule `_orig_mod`, so a
regional model's state_dict() names every weight `…h.0._orig_mod.attn…`, and
so do the files Accelerate writes from it (`save_model`, `get_state_dict`,
`save_state`, all of which keep the wrapper): a model that was never
compiled cannot load them strictly. kcache's wrappers (the precompiled
PrecompiledBlock and the traced path's OptimizedModule) leave `_orig_mod.`
out of their state_dict keys, so every save path writes what the plain
model writes, and accept both forms on load, so checkpoints written with the
prefix (stock Accelerate's, an older kcache's) still load. Module and
parameter names (named_modules, named_parameters) keep `_orig_mod`, as
torch.compile's do (docs/compatibility.md).
"""

from __future__ import annotations

from typing import Any

import torch

_INNER = "_orig_mod."


def _drop_prefix(module: torch.nn.Module, state_dict: dict[str, Any], prefix: str, local_metadata: dict) -> None:
    inner = prefix + _INNER
    # This wrapper's keys are the last ones added (its subtree has just been
    # saved): popping and re-adding them keeps the model's key order.
    mine = [k for k in state_dict if k.startswith(inner)]
    for k in mine:
        state_dict[prefix + k[len(inner):]] = state_dict.pop(k)
    # Module versions (_metadata) under both names: load_state_dict reads
    # them by the live module path, which keeps `_orig_mod`.
    meta = getattr(state_dict, "_metadata", None)
    if meta is not None:
        for k in [k for k in meta if k == inner[:-1] or k.startswith(inner)]:
            meta.setdefault(prefix + k[len(inner):], meta[k])


def _add_prefix(module: torch.nn.Module, state_dict: dict[str, Any], prefix: str, local_metadata: dict,
                strict: bool, missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
    inner = prefix + _INNER
    for k in [k for k in state_dict if k.startswith(prefix) and not k.startswith(inner)]:
        state_dict[inner + k[len(prefix):]] = state_dict.pop(k)


def plain_keys(wrapper: torch.nn.Module) -> torch.nn.Module:
    """Makes `wrapper` (a module whose only child is `_orig_mod`) save its
    state under the inner module's own keys and load either form."""
    if not wrapper.__dict__.get("_kc_plain_keys"):
        wrapper.register_state_dict_post_hook(_drop_prefix)
        wrapper.register_load_state_dict_pre_hook(_add_prefix)
        wrapper.__dict__["_kc_plain_keys"] = True
    return wrapper
