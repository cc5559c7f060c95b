"""Inductor custom passes a job sets before compiling, for the tests that
show a pass is in the key and reaches the compile worker. Importable by
the worker (tests/ is on the rank's sys.path, which the worker gets)."""

from __future__ import annotations

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass


def _is_backward(graph: torch.fx.Graph) -> bool:
    return any(n.op == "placeholder" and n.name.startswith("tangents") for n in graph.nodes)


class ScaleFirstOutput(CustomGraphPass):
    """Scales the first output of every forward graph by `factor`: a
    compiled block then computes something else than without the pass, so
    a region compiled without it (or with another factor) shows in the loss."""

    def __init__(self, factor: float = 1.5) -> None:
        self.factor = factor

    def __call__(self, graph: torch.fx.Graph) -> None:
        if _is_backward(graph):
            return
        out = graph.output_node()
        first = out.args[0][0]
        with graph.inserting_before(out):
            scaled = graph.call_function(torch.ops.aten.mul.Tensor, (first, self.factor))
        scaled.meta = dict(first.meta)
        out.args = ((scaled, *out.args[0][1:]),)

    def uuid(self) -> str:
        return f"kcache-test-scale-first-output:{self.factor!r}"


class NoUuid:
    """A pass as a plain callable: PyTorch's caches and kcache's refuse it."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        return None
