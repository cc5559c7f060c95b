"""A job that stacks a generated block module's `blk_mod.Block` and runs it
once through kcache.compile_regions beside an eager copy: the source of the
`python -c` job that tests writing their own block modules run in fresh
processes (tests/python/compile/test_trace_check.py, test_precompiled_faults.py).
It prints one JSON line: the output's largest difference from eager,
kcache.stats(), PyTorch's `unique_graphs` counter and the region outcomes."""

from __future__ import annotations

import json
import textwrap

from kc_testing import PYTHON, python_env
from harness.jobs import run_job

_JOB = textwrap.dedent("""
    import copy, json, torch, kcache, kcache.api
    from torch._dynamo.utils import counters
    import blk_mod
    torch.manual_seed(0)
    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([blk_mod.Block() for _ in range({blocks})])
        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x
    model = Stack()
    eager = copy.deepcopy(model)
    # requires_grad: every block then sees the same kind of input (one region)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1)).requires_grad_()
    out = kcache.compile_regions(model)(x)
    if {backward}:
        out.sum().backward()
    print(json.dumps({{"diff": (out - eager(x)).abs().max().item(), "kcache": kcache.stats(),
                      "graphs": counters["stats"]["unique_graphs"],
                      "regions": kcache.api.region_outcomes()}}))
""")


def run_stack(tmp_path, name: str, blocks: int, backward: bool = False, **env: str) -> tuple[dict, str]:
    """The job in a fresh process with the block modules in tmp_path/src,
    the node tier in tmp_path/node and an Inductor dir of its own."""
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), KCACHE_PRECOMPILED="1",
                     PYTHONPATH=str(tmp_path / "src"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{name}"),
                     **env)
    out = run_job([PYTHON, "-c", _JOB.format(blocks=blocks, backward=backward)], timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr
