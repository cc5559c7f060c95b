"""kcache.accelerate.install(): Accelerate's own regional path through kcache.

    import kcache.accelerate
    kcache.accelerate.install()
    accelerator = Accelerator(dynamo_plugin=TorchDynamoPlugin(backend="inductor",
                                                              use_regional_compilation=True))
    model, opt = accelerator.prepare(model, opt)   # regions compiled through kcache

accelerate.accelerator imports compile_regions (and its DeepSpeed variant,
and from 1.12 on its FSDP2 variant, which compiles blocks in place) by
name, so patching accelerate.utils alone would change nothing: install()
rebinds the names in every module that holds them. uninstall() restores them.
"""

from __future__ import annotations

import importlib

from kcache.api import compile_regions, compile_regions_in_place

_MODULES = ("accelerate.accelerator", "accelerate.utils", "accelerate.utils.other")
_saved: dict[tuple[str, str], object] = {}


def _deepspeed_variant(module, **compile_kwargs):
    compile_regions_in_place(module, **compile_kwargs)


def _fsdp2_variant(module, **compile_kwargs):
    # Accelerate >= 1.12's FSDP2 path: the blocks are compiled in place
    # (nn.Module.compile), so fully_shard's hooks, added afterwards, still run.
    compile_regions_in_place(module, **compile_kwargs)
    return module


def install() -> None:
    """Routes Accelerate's regional compilation through kcache (idempotent)."""
    replacements = {"compile_regions": compile_regions,
                    "compile_regions_deepspeed": _deepspeed_variant,
                    "compile_regions_fsdp2": _fsdp2_variant}
    for mod_name in _MODULES:
        mod = importlib.import_module(mod_name)
        for attr, new in replacements.items():
            if hasattr(mod, attr):
                _saved.setdefault((mod_name, attr), getattr(mod, attr))
                setattr(mod, attr, new)


def uninstall() -> None:
    for (mod_name, attr), original in _saved.items():
        setattr(importlib.import_module(mod_name), attr, original)
    _saved.clear()


def installed() -> bool:
    return bool(_saved)
