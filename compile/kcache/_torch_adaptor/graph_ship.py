"""A Dynamo graph carried to another process and compiled there so that
every process that compiles the same carried graph hits the caches it
filled (the traced path's compile off the training thread:
docs/cold-start.md, "The traced path off the thread").

- ship_graph(gm, example_inputs): bytes holding the graph node for node (op,
  name, target, arguments, type; the targets pickle by reference: torch's
  functions and operators), the graph-valued attributes it calls (the bodies
  of higher-order ops) and constant tensors, the node metadata
  AOTAutograd's and Inductor's cache keys read (stack traces, which the
  generated code prints; Dynamo's input sources; static-input marks; the
  example values' metadata, which AOTAutograd's cache reads) and
  the example inputs' metadata (shape, stride, dtype, device, requires_grad,
  Parameter or not). NotShippable when the graph has inputs that are not
  tensors (a dynamic-shape graph's sizes), or something that does not pickle.
- land_graph(blob): the GraphModule again, and fake example inputs made from
  that metadata (no memory: a fresh FakeTensorMode with a ShapeEnv).
- compile_landed(gm, inputs, patches): compile_fx as torch's
  standalone_compile runs it: a tracing context of its own whose fake mode
  has that ShapeEnv (PyTorch's caches bypass a compile that has none: "No
  shape env"), shapes from the inputs, backward lowered at once.

torch.fx's own GraphModule pickling is not used: it re-traces the
generated code, which renames nodes and turns keyword arguments into
positional ones. The carried graph keeps the traced one's nodes, but not all
of its metadata, so a cache entry made from it is found only by a compile of
a carried graph: the worker and every process restoring its bundle compile
land_graph(the same bytes). The caller proves that the carried graph computes
what the traced one does by keying it again (kcache.traced.offthread).
"""

from __future__ import annotations

import contextlib
import io
import pickle
from typing import Any

import torch

# Node metadata that cache keys read and that pickles (no fake tensors).
_NODE_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "tensor_dict", "seq_nr",
              "torch_fn", "original_aten")
_FORMAT = 1


class NotShippable(ValueError):
    """The graph cannot be carried to another process faithfully."""


def _value_desc(v: Any):
    """A node's example value as metadata: AOTAutograd caches a graph only
    when every method call's receiver has one (it tells tensors so)."""
    if isinstance(v, torch.Tensor) and type(v).__name__ in ("FakeTensor", "Tensor", "Parameter") \
            and all(isinstance(d, int) for d in (*v.shape, *v.stride())):
        return ("t", tuple(v.shape), tuple(v.stride()), str(v.dtype).removeprefix("torch."),
                str(v.device), bool(v.requires_grad))
    if isinstance(v, (tuple, list)):
        inner = [_value_desc(x) for x in v]
        return ("seq", type(v) is list, inner) if all(d is not None for d in inner) else None
    return None


def _fake_value(desc):
    if desc[0] == "seq":
        values = [_fake_value(d) for d in desc[2]]
        return values if desc[1] else tuple(values)
    _, shape, stride, dtype, device, requires_grad = desc
    t = torch.empty_strided(shape, stride, dtype=getattr(torch, dtype), device=device)
    return t.requires_grad_(requires_grad) if t.is_floating_point() or t.is_complex() else t


def _node_meta(node) -> dict[str, Any]:
    out = {}
    value = _value_desc(node.meta.get("example_value"))
    if value is not None:
        out["example_value"] = value
    for name in _NODE_META:
        if name in node.meta:
            try:
                _dumps(node.meta[name])
            except Exception:  # noqa: BLE001 - this item stays behind
                continue
            out[name] = node.meta[name]
    return out


class _Ref:
    """A node argument that is another node, by name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self):
        return (_Ref, (self.name,))


class _Pickler(pickle.Pickler):
    """Operators by name: ATen's (and other libraries') OpOverloads do not
    pickle, and a higher-order operator (autograd_function_apply, wrap, ...)
    would come back as a copy, not the registered singleton."""

    def persistent_id(self, obj):
        if isinstance(obj, torch._ops.OpOverload):
            ns, name = obj._schema.name.split("::", 1)
            return ("op", ns, name, obj._overloadname or "default")
        if isinstance(obj, torch._ops.OpOverloadPacket):
            ns, name = obj._qualified_op_name.split("::", 1)
            return ("packet", ns, name)
        if isinstance(obj, torch._ops.HigherOrderOperator):
            return ("hop", obj.name())
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid):
        kind, *rest = pid
        if kind == "hop":
            return torch._ops._higher_order_ops[rest[0]]
        packet = getattr(getattr(torch.ops, rest[0]), rest[1])
        return getattr(packet, rest[2]) if kind == "op" else packet


def _dumps(value) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buf.getvalue()


def _graph_state(gm: torch.fx.GraphModule) -> dict[str, Any]:
    attrs: dict[str, tuple[str, Any]] = {}
    nodes = []
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            value = gm.get_submodule(node.target) if node.op == "call_module" else _attr(gm, node.target)
            if isinstance(value, torch.fx.GraphModule):
                attrs[node.target] = ("graph", _graph_state(value))
            elif isinstance(value, torch.Tensor) and type(value) in (torch.Tensor, torch.nn.Parameter):
                attrs[node.target] = ("tensor", value.detach())
            else:
                raise NotShippable(f"the graph reads a {type(value).__name__} attribute ({node.target})")
        meta = _node_meta(node)
        if node.op == "placeholder":
            meta["_dynamo_source"] = getattr(node, "_dynamo_source", None)
        nodes.append({"op": node.op, "name": node.name, "target": node.target,
                      "args": torch.fx.node.map_arg(node.args, lambda n: _Ref(n.name)),
                      "kwargs": torch.fx.node.map_arg(node.kwargs, lambda n: _Ref(n.name)),
                      "type": node.type, "meta": meta})
    return {"class": type(gm).__name__, "nodes": nodes, "attrs": attrs}


def _attr(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _build(state: dict[str, Any], mode) -> torch.fx.GraphModule:
    root = torch.nn.Module()
    for path, (kind, value) in state["attrs"].items():
        *parents, last = path.split(".")
        owner = root
        for part in parents:
            if not hasattr(owner, part):
                owner.add_module(part, torch.nn.Module())
            owner = getattr(owner, part)
        if kind == "graph":
            owner.add_module(last, _build(value, mode))
        elif isinstance(value, torch.nn.Parameter):
            owner.register_parameter(last, value)
        else:
            owner.register_buffer(last, value)
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}

    def resolve(a):
        return env[a.name] if isinstance(a, _Ref) else a

    for n in state["nodes"]:
        args = torch.fx.node.map_aggregate(n["args"], resolve)
        kwargs = torch.fx.node.map_aggregate(n["kwargs"], resolve)
        node = graph.create_node(n["op"], n["target"], args, kwargs, name=n["name"], type_expr=n["type"])
        if node.name != n["name"]:
            raise NotShippable(f"node {n['name']} came back as {node.name}")
        meta = dict(n["meta"])
        source = meta.pop("_dynamo_source", None)
        if node.op == "placeholder":
            node._dynamo_source = source
        if "example_value" in meta:
            with mode:
                meta["example_value"] = _fake_value(meta["example_value"])
        node.meta.update(meta)
        env[n["name"]] = node
    return torch.fx.GraphModule(root, graph, class_name=state["class"])


def ship_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bytes:
    if graph_ship_missing():
        raise NotShippable("this torch lacks what carrying a graph needs: " + ", ".join(graph_ship_missing()))
    inputs = []
    for t in example_inputs:
        if not isinstance(t, torch.Tensor) or type(t) not in (torch.Tensor, torch.nn.Parameter):
            raise NotShippable(f"a graph input is a {type(t).__name__}, not a plain tensor "
                               "(dynamic shapes or a tensor subclass)")
        inputs.append((tuple(t.shape), tuple(t.stride()), str(t.dtype).removeprefix("torch."),
                       str(t.device), bool(t.requires_grad), isinstance(t, torch.nn.Parameter)))
    graph_meta = {"dynamo_compile_id": "dynamo_compile_id" in gm.meta,
                  "param_name_to_source": getattr(gm, "_param_name_to_source", None)}
    try:
        return _dumps({"format": _FORMAT, "graph": _graph_state(gm), "graph_meta": graph_meta,
                       "inputs": inputs})
    except NotShippable:
        raise
    except Exception as e:  # noqa: BLE001 - anything that does not pickle
        raise NotShippable(f"the graph does not pickle ({type(e).__name__}: {e})") from None


def land_graph(blob: bytes) -> tuple[torch.fx.GraphModule, list[torch.Tensor], Any]:
    """(GraphModule, fake example inputs, their fake mode)."""
    from torch._guards import CompileId
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    d = _Unpickler(io.BytesIO(blob)).load()
    if d.get("format") != _FORMAT:
        raise NotShippable(f"carried graph format {d.get('format')!r}, not {_FORMAT}")
    mode = FakeTensorMode(shape_env=ShapeEnv())
    gm = _build(d["graph"], mode)
    if d["graph_meta"]["dynamo_compile_id"]:
        # Its presence marks a Dynamo graph (AOTAutograd then reads the
        # input sources); a fixed value keeps every process's key the same.
        gm.meta["dynamo_compile_id"] = CompileId(frame_id=0, frame_compile_id=0)
    if d["graph_meta"]["param_name_to_source"] is not None:
        gm._param_name_to_source = d["graph_meta"]["param_name_to_source"]
    inputs = []
    with mode:
        for shape, stride, dtype, device, requires_grad, is_param in d["inputs"]:
            t = torch.empty_strided(shape, stride, dtype=getattr(torch, dtype), device=device)
            t = torch.nn.Parameter(t, requires_grad=requires_grad) if is_param else t.requires_grad_(requires_grad)
            inputs.append(t)
    return gm, inputs, mode


def compile_landed(gm: torch.fx.GraphModule, inputs: list[torch.Tensor], mode,
                   config_patches: dict[str, Any], *, uncached: bool = False):
    """`uncached`: every PyTorch cache bypassed (a refused bundle's fresh compile)."""
    from torch._inductor.compile_fx import compile_fx

    from .inductor import call_free_graphs_cached, custom_autograd_cacheable

    functorch = {"force_non_lazy_backward_lowering": True}
    if custom_autograd_cacheable(gm):
        functorch["autograd_cache_allow_custom_autograd_functions"] = True
    context = torch._guards.TracingContext(mode)
    caches = torch._inductor.config.patch(force_disable_caches=True) if uncached else contextlib.nullcontext()
    with torch._guards.tracing(context), torch._functorch.config.patch(**functorch), caches, \
            call_free_graphs_cached():
        return compile_fx(gm, inputs, config_patches=config_patches or None, ignore_shape_env=True)


def required() -> dict[str, bool]:
    """What carrying needs. Not in the adaptor's start-up checklist: it
    imports Inductor's compile_fx, which a warm start never does; asked when
    a graph is first carried (graph_ship_missing), and by the drift test."""
    import inspect

    from torch._inductor.compile_fx import compile_fx

    return {
        "compile_fx(ignore_shape_env=)": "ignore_shape_env" in inspect.signature(compile_fx).parameters,
        "torch._guards.TracingContext / tracing": hasattr(torch._guards, "TracingContext")
        and hasattr(torch._guards, "tracing"),
        "torch._guards.CompileId(frame_id, frame_compile_id)": hasattr(torch._guards, "CompileId"),
        "torch._ops._higher_order_ops": isinstance(getattr(torch._ops, "_higher_order_ops", None), dict),
    }


_missing: list[str] | None = None


def graph_ship_missing() -> list[str]:
    """The private APIs carrying needs that this torch lacks (checked once)."""
    global _missing
    if _missing is None:
        _missing = [name for name, ok in required().items() if not ok]
    return _missing
