"""Canonical bytes of one region's captured graph: the key's "region" field.

The input is the FX graph Dynamo hands to a torch.compile backend, with its
example inputs. Parameters and buffers are graph inputs there (Dynamo's
inline_inbuilt_nn_modules, the default), so identical blocks with different
weights give identical graphs.

What goes in: op targets, argument structure, constants (floats by exact
bits), canonical value numbering, and for each input its role (activation /
parameter / buffer), dtype, shape (symbolic dims as "s"), stride class,
requires_grad and device type.
What never goes in: parameter values, module or instance names, placeholder
names, addresses, source locations, file paths, device indices.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kcache import _torch_adaptor as adaptor


@dataclass(frozen=True)
class RegionFingerprint:
    canonical: str  # the canonical text; the key hashes it
    num_nodes: int
    op_counts: dict[str, int]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical.encode()).hexdigest()

    def summary(self) -> str:
        top = sorted(self.op_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
        return f"{self.num_nodes} nodes; " + ", ".join(f"{k}x{v}" for k, v in top)


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target  # call_method names, get_attr paths handled separately
    if adaptor.is_aten_op(target):
        return f"op:{target}"
    mod = getattr(target, "__module__", None) or ""
    qual = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if qual is None:
        return f"obj:{type(target).__qualname__}"
    return f"{mod}.{qual}"


class _Symbols:
    """Canonical names for symbolic dims, numbered in order of appearance.

    A symbol that the shape environment has since specialized to a
    constant is that constant; two dims with the same symbol share a name,
    so "s0,s0" (square) and "s0,s1" stay different regions.
    """

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def dim(self, d: Any) -> str:
        if isinstance(d, int):
            return str(d)
        node = getattr(d, "node", None)
        if node is None:
            return "s?"
        expr = node.expr
        shape_env = getattr(node, "shape_env", None)
        if shape_env is not None:
            try:
                expr = shape_env.replace(expr)
            except Exception:  # noqa: BLE001 - best effort; raw expr is still canonical
                pass
        if getattr(expr, "is_number", False):
            return str(int(expr))
        text = str(expr)
        if text not in self.names:
            self.names[text] = f"s{len(self.names)}"
        return self.names[text]


_symbols = _Symbols()


def _dim(d: Any) -> str:
    return _symbols.dim(d)


def _stride_class(t: torch.Tensor) -> str:
    if t.layout != torch.strided:
        return str(t.layout)
    if t.is_contiguous():
        return "contig"
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return "cl"
    try:
        return "s" + ",".join(_dim(s) for s in t.stride())
    except RuntimeError:
        return "?"


def _tensor_desc(t: torch.Tensor) -> str:
    shape = ",".join(_dim(s) for s in t.shape)
    return (f"T[{str(t.dtype).removeprefix('torch.')};{shape};{_stride_class(t)};"
            f"rg={int(t.requires_grad)};{t.device.type}]")


class _Canon:
    def __init__(self) -> None:
        self.ids: dict[torch.fx.Node, int] = {}

    def arg(self, a: Any) -> str:
        if isinstance(a, torch.fx.Node):
            return f"%{self.ids[a]}"
        if isinstance(a, bool) or a is None:
            return repr(a)
        if isinstance(a, int):
            return f"i{a}"
        if isinstance(a, float):
            # Exact bits: 0.1 and 0.1000000001 differ, -0.0 and 0.0 differ.
            return "f" + struct.pack("<d", a).hex() if not math.isnan(a) else "fnan"
        if isinstance(a, str):
            return "s" + repr(a)
        if isinstance(a, tuple | list):
            inner = ",".join(self.arg(x) for x in a)
            return ("(" + inner + ")") if isinstance(a, tuple) else ("[" + inner + "]")
        if isinstance(a, dict):
            return "{" + ",".join(f"{k}:{self.arg(v)}" for k, v in sorted(a.items(), key=lambda kv: str(kv[0]))) + "}"
        if isinstance(a, slice):
            return f"slice({self.arg(a.start)},{self.arg(a.stop)},{self.arg(a.step)})"
        if isinstance(a, torch.dtype):
            return str(a)
        if isinstance(a, torch.device):
            return f"dev:{a.type}"  # never the index
        if isinstance(a, torch.memory_format | torch.layout):
            return str(a)
        if isinstance(a, torch.Tensor):
            return _tensor_desc(a)
        if isinstance(a, torch.SymInt | torch.SymFloat | torch.SymBool):
            return "sym"
        if a is Ellipsis:
            return "..."
        return "obj:" + _target_name(a)


def input_role(node: torch.fx.Node, value: Any) -> str:
    if isinstance(value, torch.nn.Parameter):
        return "param"
    name = node.target if isinstance(node.target, str) else ""
    if "_buffers_" in name:
        return "buffer"
    return "act"


def fingerprint_graph(gm: torch.fx.GraphModule, example_inputs: list[Any], *,
                      roles: list[str] | None = None,
                      value_meta: str = "example_value") -> RegionFingerprint:
    """Canonical form of a Dynamo graph and its inputs (see module doc).

    A torch.export graph passes `roles` (from its graph signature) and
    value_meta="val", where export keeps each placeholder's fake value.
    """
    global _symbols
    _symbols = _Symbols()
    canon = _Canon()
    # Global state the graph was traced under: grad mode decides whether
    # AOTAutograd builds a training (forward + backward) or inference graph.
    lines: list[str] = [f"grad={int(torch.is_grad_enabled())}"]
    ops: Counter[str] = Counter()
    placeholder_index = 0
    for i, node in enumerate(gm.graph.nodes):
        canon.ids[node] = i
        if node.op == "placeholder":
            value = example_inputs[placeholder_index] if placeholder_index < len(example_inputs) else None
            placeholder_index += 1
            # Dynamo's fake value carries symbolic dims where the real example
            # input has concrete ones; the role comes from the real input.
            traced = node.meta.get(value_meta, value)
            if isinstance(traced, torch.Tensor):
                desc = _tensor_desc(traced)
                if isinstance(value, torch.Tensor) and value.requires_grad != traced.requires_grad:
                    desc = _tensor_desc(value)
            elif isinstance(value, torch.SymInt) or isinstance(traced, torch.SymInt):
                desc = "symint"
            else:
                desc = canon.arg(value)
            role = roles[placeholder_index - 1] if roles else input_role(node, value)
            lines.append(f"{i}=in:{role}:{desc}")
        elif node.op == "get_attr":
            attr = gm
            for part in str(node.target).split("."):
                attr = getattr(attr, part)
            if isinstance(attr, torch.Tensor):
                # A constant baked into the graph: its value is code.
                value_hash = hashlib.sha256(attr.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16] if attr.numel() else "empty"
                lines.append(f"{i}=const:{_tensor_desc(attr)}:{value_hash}")
            else:
                lines.append(f"{i}=attr:{type(attr).__qualname__}")
        elif node.op == "output":
            lines.append(f"out:{canon.arg(node.args)}")
        else:
            target = _target_name(node.target) if node.op != "call_method" else f"method:{node.target}"
            ops[target.rsplit(".", 1)[-1]] += 1
            kwargs = canon.arg(dict(node.kwargs)) if node.kwargs else ""
            lines.append(f"{i}={node.op}:{target}{canon.arg(tuple(node.args))}{kwargs}")
    return RegionFingerprint("\n".join(lines), len(lines), dict(ops))
