"""Issue 49's report as a job: four PatchBlocks compiled with
kcache.compile_regions, one training step, then the class's forward replaced
(as a fine-tuning tool or a test's monkeypatch does after the model exists),
and the next forward compared with eager. Prints one JSON line
(tests/python/compile/test_every_call.py).

With argv "signature" ["patch"]: a class member replaced between the first
calls of two call signatures. Four HelperBlocks, one training step, then
(with "patch") the class's helper method replaced, then an eval forward,
the blocks' first call under that signature, compared with eager. The cold
run stores both signatures' variants, the eval one compiled while the
parameters' grads are set (torch 2.13 and 2.14 could not load such a
variant without releases/v2_13.py's guards_state_unpickling); a warm one
loads them."""

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


class HelperBlock(PatchBlock):
    def act(self, x):
        return torch.relu(x)

    def forward(self, x):
        return self.act(self.lin(x)) + x


def act_sigmoid(self, x):
    return torch.sigmoid(x) * 3.0


class Model(torch.nn.Module):
    def __init__(self, block: type = PatchBlock) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(block() for _ in range(4))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def trained(block: type):
    """The model, its compiled form and an input, after one training step
    (the grads stay set)."""
    torch.manual_seed(0)
    model = Model(block)
    compiled = kcache.compile_regions(model)
    x = torch.randn(4, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compiled(x).square().mean().backward()
    opt.step()
    return model, compiled, x


def replaced_forward() -> None:
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())
    logging.getLogger("kcache").addHandler(handler)
    model, compiled, x = trained(PatchBlock)
    for p in model.parameters():
        p.grad = None
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


def new_signature(patch: bool) -> None:
    model, compiled, x = trained(HelperBlock)
    before = kcache.stats()
    if patch:
        HelperBlock.act = act_sigmoid  # after the training signature's first calls
    compiled.eval()
    with torch.no_grad():
        eager = model(x)
        got = compiled(x)
    after = kcache.stats()
    print(json.dumps({"diff": float((got - eager).abs().max()),
                      "delta": {k: after[k] - before[k] for k in ("precompiled_blocks", "precompiled_check_failures",
                                                                  "precompiled_fallbacks", "restore_failures",
                                                                  "hits_node", "misses")}}))


def main() -> None:
    if sys.argv[1:2] == ["signature"]:
        new_signature(sys.argv[2:] == ["patch"])
    else:
        replaced_forward()


if __name__ == "__main__":
    sys.exit(main())
