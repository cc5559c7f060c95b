"""Spike (not a test): can a precompiled region serve an FSDP2 block if it
compiles only the block's own forward, with FSDP2's hooks left to run
eagerly around it (docs/cold-start.md, "What is not done")?

Two ranks (gloo). Two copies of a 2-block GPT-2, each block fully_shard-ed,
then the root. In copy A every block's instance `forward` is replaced by a
function that, on its first call (inside FSDP2's forward, after its
pre-hook all-gathered the parameters), aot-compiles
`type(block).forward(block, ...)` through kcache's adaptor with the
portable checks kcache records, and runs the compiled function from then
on; copy B is plain FSDP2, eager. Three AdamW steps each; writes, per rank
(results-rankR.json here), whether the compile took, how many portable checks and trace-needed
reasons it recorded, what the parameters were during the forward, and the
largest loss and parameter differences between A and B.

    KCACHE_LOCAL_DIR=$(mktemp -d) .venv/bin/python -m torch.distributed.run --standalone \
        --nproc-per-node 2 bench/spikes/fsdp2_forward_entry/spike.py
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))


def forward_entry(block, *args, **kwargs):
    """The block's own forward, without its module hooks."""
    return type(block).forward(block, *args, **kwargs)


def main() -> None:
    from train_regional import build_model

    from kcache import _torch_adaptor as adaptor
    from kcache.guards import portable_checks

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    a = build_model("gpt2", 2, 64)
    b = copy.deepcopy(a)
    report = {"rank": rank, "blocks": []}
    for model in (a, b):
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
    for i, block in enumerate(a.transformer.h):
        state: dict = {"fn": None}
        info = {"block": i, "class": type(block).__name__}
        report["blocks"].append(info)

        def compiled_forward(*args, _block=block, _state=state, _info=info, **kwargs):
            if _state["fn"] is None:
                _info["param_types"] = sorted({type(p).__name__ for p in _block.parameters()})
                checks, trace_needed = [], []
                try:
                    _state["fn"] = adaptor.aot_compile_call(
                        forward_entry, (_block, *args), kwargs, None, None, None, checks=checks,
                        trace_needed=trace_needed, resolve=portable_checks.resolve,
                        expected=portable_checks.expected)
                    _info.update(compiled=True, checks=len(checks), trace_needed=trace_needed[:5])
                except Exception as e:  # noqa: BLE001 - the spike's answer
                    _info.update(compiled=False, error=f"{type(e).__name__}: {str(e)[:300]}")
                    _state["fn"] = False
            if _state["fn"] is False:
                return forward_entry(_block, *args, **kwargs)
            _info["runs"] = _info.get("runs", 0) + 1
            if not adaptor.aot_guard_check(_state["fn"], _block, *args, **kwargs):
                _info["guard_failures"] = _info.get("guard_failures", 0) + 1
                return forward_entry(_block, *args, **kwargs)
            return adaptor.aot_run(_state["fn"], _block, *args, **kwargs)

        block.forward = compiled_forward
    losses = {"a": [], "b": []}
    data = torch.Generator().manual_seed(1000 + rank)
    batches = [torch.randint(0, 256, (2, 32), generator=data) for _ in range(3)]
    for name, model in (("a", a), ("b", b)):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for ids in batches:
            loss = model(ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses[name].append(loss.item())
    report["losses"] = losses
    report["loss_max_diff"] = max(abs(x - y) for x, y in zip(losses["a"], losses["b"]))
    report["param_max_diff"] = max(
        (pa.full_tensor() - pb.full_tensor()).abs().max().item()
        for pa, pb in zip(a.parameters(), b.parameters()))
    report["dynamo_unique_graphs"] = adaptor.counters().get("stats", {}).get("unique_graphs", 0)
    out = Path(__file__).with_name(f"results-rank{rank}.json")
    out.write_text(json.dumps(report, indent=1) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
