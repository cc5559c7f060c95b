"""Issue 49's report as a job: four PatchBlocks compiled with
kcache.compile_regions, one training step, then the class's forward replaced
(as a fine-tuning tool or a test's monkeypatch does after the model exists),
and the next forward compared with eager. Prints one JSON line
(tests/python/compile/test_every_call.py)."""

from __future__ import annotations

import json
import logging
import sys

import torch

import kcache


class PatchBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.lin(x)) + 1.0


def forward_plus_five(self, x):
    return torch.relu(self.lin(x)) + 5.0


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(PatchBlock() for _ in range(4))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def main() -> None:
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())
    logging.getLogger("kcache").addHandler(handler)
    torch.manual_seed(0)
    model = Model()
    compiled = kcache.compile_regions(model)
    x = torch.randn(4, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compiled(x).square().mean().backward()
    opt.step()
    opt.zero_grad()
    before = kcache.stats()
    with torch.no_grad():
        same = float((compiled(x) - model(x)).abs().max())
    PatchBlock.forward = forward_plus_five  # after the first call
    with torch.no_grad():
        eager = model(x)
        got = compiled(x)
    after = kcache.stats()
    print(json.dumps({"unchanged_diff": same, "patched_diff": float((got - eager).abs().max()),
                      "delta": {k: after[k] - before[k] for k in ("precompiled_rechecks", "precompiled_check_failures",
                                                                  "precompiled_watch_refreshes", "compiles")},
                      "stats": {k: after[k] for k in ("hits_node", "misses", "precompiled_blocks")},
                      "said": [r for r in records if "after a block's first call" in r]}))


if __name__ == "__main__":
    sys.exit(main())
