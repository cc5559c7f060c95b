"""Regions: the repeated blocks of a model, found as Accelerate finds them.

Accelerate's rule (accelerate.utils.other.compile_regions): a ModuleList
whose children all share one class is a list of repeated blocks; each block
is compiled on its own, everything else is compiled whole. kcache refines it
by structure: blocks of one class whose parameter shapes, dtypes or
configuration differ are different regions (their keys differ anyway, since
the graph differs; the report says so up front).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


def is_repeated_blocks(module: torch.nn.Module) -> bool:
    """Accelerate's test: a non-empty ModuleList of one class."""
    return (isinstance(module, torch.nn.ModuleList) and len(module) > 0
            and all(type(m) is type(module[0]) for m in module))


def has_repeated_blocks(module: torch.nn.Module) -> bool:
    return any(is_repeated_blocks(m) for m in module.modules())


def structure_signature(block: torch.nn.Module) -> tuple:
    """Class, submodule classes, and parameter/buffer names, shapes and dtypes.

    Plain attributes are left out on purpose: blocks carry their own index
    (transformers' layer_idx) and splitting on it would make every block a
    region. Attributes that do change the graph (an eps, an activation name)
    still split the key, because the key is the traced graph.
    """
    tensors = tuple((name, tuple(t.shape), str(t.dtype))
                    for name, t in list(block.named_parameters()) + list(block.named_buffers()))
    classes = tuple(type(m).__qualname__ for m in block.modules())
    return (type(block).__qualname__, classes, tensors)


@dataclass
class Region:
    name: str  # class name, plus "#n" when one class has several structures
    path: str  # where the first block sits, e.g. "transformer.h.0"
    count: int
    parameters: int
    members: list[str] = field(default_factory=list)


def find_regions(model: torch.nn.Module) -> list[Region]:
    """The distinct repeated-block regions of `model`, in module order."""
    regions: dict[tuple, Region] = {}
    by_class: dict[str, int] = {}
    for path, module in model.named_modules():
        if not is_repeated_blocks(module):
            continue
        for i, block in enumerate(module):
            sig = structure_signature(block)
            member = f"{path}.{i}" if path else str(i)
            if sig not in regions:
                cls = type(block).__name__
                n = by_class.get(cls, 0)
                by_class[cls] = n + 1
                regions[sig] = Region(cls if n == 0 else f"{cls}#{n}", member, 0,
                                      sum(p.numel() for p in block.parameters()))
            regions[sig].count += 1
            regions[sig].members.append(member)
    return list(regions.values())


def region_report(model: torch.nn.Module) -> str:
    rows = [("region", "blocks", "params/block", "first")]
    rows += [(r.name, str(r.count), f"{r.parameters:,}", r.path) for r in find_regions(model)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)
