"""Runs blocks from tests/models/blocks.py through kcache.compile_regions in
one process and prints one JSON line per call: for each case, the largest
difference from eager (outputs and gradients), the path each region took
and what kcache's counters did.

    python precompiled_job.py zoo [kind ...]
    python precompiled_job.py mutations
    python precompiled_job.py in-place
"""

from __future__ import annotations

import copy
import json
import sys

import torch

import kcache
import kcache.api
from models import blocks


def _max_diff(a, b) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b)) if a else 0.0


def run_case(model: torch.nn.Module, inputs: tuple) -> dict:
    """Eager on a copy, then kcache; forward and backward of both."""
    eager = copy.deepcopy(model)
    before = kcache.stats()
    seen = len(kcache.api.region_outcomes())
    compiled = kcache.compile_regions(model)
    results = []
    for m in (eager, compiled):
        xs = tuple(t.clone().requires_grad_(t.is_floating_point()) for t in inputs)
        out = m(*xs)
        out.float().square().mean().backward()
        grads = [p.grad for p in (m if m is eager else model).parameters() if p.grad is not None]
        results.append((out.detach(), grads))
    after = kcache.stats()
    keys = ("misses", "hits_node", "hits_server", "precompiled_traces", "precompiled_blocks",
            "precompiled_fallbacks", "precompiled_guard_failures", "precompiled_check_failures",
            "restore_failures")
    return {
        "out_diff": (results[0][0].double() - results[1][0].double()).abs().max().item(),
        "grad_diff": _max_diff([g.double() for g in results[0][1]], [g.double() for g in results[1][1]]),
        "grads": len(results[1][1]),
        "regions": kcache.api.region_outcomes()[seen:],
        "delta": {k: after[k] - before[k] for k in keys},
    }


def zoo(kinds: list[str]) -> dict:
    out = {}
    for kind in kinds or list(blocks.KINDS):
        make, inputs = blocks.KINDS[kind]
        torch.manual_seed(0)
        out[kind] = run_case(make(), inputs())
    return out


def _norms(seed=0, dtype=torch.float32, train=True, **kw):
    torch.manual_seed(seed)
    return blocks.Stack([blocks.Norm(**{"layer_idx": i, **kw}) for i in range(2)]).to(dtype).train(train)


def _flags(seed=0, first_idx=0, **cfg):
    torch.manual_seed(seed)
    config = blocks.Config(**cfg)
    return blocks.Stack([blocks.ConfigFlag(config, layer_idx=first_idx + i) for i in range(2)])


def mutations() -> dict:
    x, = blocks._tokens()
    cases = {
        "base": (_norms(), x),
        "other_weights": (_norms(seed=7), x),
        "other_block_indices": (_norms(layer_idx=5), x),
        "eps": (_norms(eps=1e-3), x),
        "activation": (_norms(act="silu"), x),
        "dtype": (_norms(dtype=torch.float64), x.double()),
        "training_flag": (_norms(train=False), x),
        "buffer_shape": (blocks.Stack([_with_shift(blocks.Norm(layer_idx=i), 2 * blocks.DIM)
                                       for i in range(2)]), x),
        "config_base": (_flags(), x),
        "config_other_weights_and_indices": (_flags(seed=3, first_idx=4), x),
        "config_value_read_in_forward": (_flags(scale=0.25), x),
        "config_flag_read_in_forward": (_flags(use_gate=False), x),
    }
    return {name: run_case(model, (inp,)) for name, (model, inp) in cases.items()}


def in_place() -> dict:
    """compile_regions_in_place (DeepSpeed's and FSDP2's way) on three Norm
    blocks: block 1 has a forward pre-hook before compiling; after the first
    step a hook is added to block 0 too, after the second one to block 2's
    Linear (a hook inside the forward). Per step: the difference from
    eager, how often the hooks ran, kcache's counters."""
    torch.manual_seed(0)
    model = blocks.Stack([blocks.Norm(layer_idx=i) for i in range(3)])
    eager = copy.deepcopy(model)
    calls = {"hook": 0}

    def hook(module, args):
        calls["hook"] += 1
        return (args[0] * 0.5,)  # changes the output: a skipped hook shows

    for m in (model, eager):
        m.blocks[1].register_forward_pre_hook(hook)
    kcache.compile_regions_in_place(model)
    x, = blocks._tokens()
    steps = []
    def inner_hook(module, args, out):
        calls["hook"] += 1
        return out * 2.0

    for step in range(3):
        for m in (model, eager):
            if step == 1:
                m.blocks[0].register_forward_pre_hook(hook)
            if step == 2:
                m.blocks[2].lin.register_forward_hook(inner_hook)
        before, calls["hook"] = kcache.stats(), 0
        outs = [m(x).detach() for m in (eager, model)]
        after = kcache.stats()
        steps.append({"diff": (outs[0] - outs[1]).abs().max().item(), "hook_calls": calls["hook"],
                      "delta": {k: after[k] - before[k] for k in
                                ("precompiled_traces", "precompiled_blocks", "precompiled_fallbacks",
                                 "hits_node", "misses", "verify_failures")}})
    return {"steps": steps, "regions": kcache.api.region_outcomes()}


def _with_shift(block, n):
    block.shift = torch.zeros(n)
    return block


if __name__ == "__main__":
    what = sys.argv[1]
    result = zoo(sys.argv[2:]) if what == "zoo" else in_place() if what == "in-place" else mutations()
    print(json.dumps(result))
