"""The torch releases kcache supports: one module per release (v2_13.py,
v2_14.py, v2_15.py) holding what differs in it, and the rule for a torch
outside them (docs/torch-support.md).

A release is a major.minor pair: every patch release of a supported one is
supported (2.14.0 and 2.14.1 alike); check_torch() still verifies the
private APIs themselves on whatever patch is installed, so a patch release
that drifts is caught by the checklist, not by its number.
"""

from __future__ import annotations

import importlib
import types

SUPPORTED = ("2.13", "2.14", "2.15")


def release_of(version: str) -> str:
    """'2.14.1+cu130' -> '2.14'; '2.15.0a0+git1234' -> '2.15'."""
    parts = version.split("+")[0].split(".")
    if len(parts) < 2 or not parts[0].isdigit():
        return version
    minor = "".join(c for c in parts[1] if c.isdigit()) or parts[1]
    return f"{parts[0]}.{minor}"


def facts(version: str) -> types.ModuleType | None:
    """The module of `version`'s release, or None outside the window."""
    release = release_of(version)
    if release not in SUPPORTED:
        return None
    return importlib.import_module(f"{__name__}.v{release.replace('.', '_')}")


def every() -> list[types.ModuleType]:
    return [facts(r + ".0") for r in SUPPORTED]


def newest() -> types.ModuleType:
    return every()[-1]


def portable_config(cfg) -> dict:
    """cfg.save_config_portable(), through the release's own way where it
    has one (v2_15.portable_config)."""
    import torch

    way = getattr(facts(torch.__version__) or newest(), "portable_config", None)
    return way(cfg) if way is not None else cfg.save_config_portable()
