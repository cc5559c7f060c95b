"""A class member replaced between the first calls of two call signatures
of a block, as a job: four HelperBlocks compiled with kcache.compile_regions,
one training step, then (argv[1] == "patch") the class's helper method
replaced, then an eval forward, the blocks' first call under that
signature, compared with eager. The cold run stores both signatures'
variants, the eval one compiled while the parameters' grads are set
(torch 2.13 and 2.14 could not load such a variant without
releases/v2_13.py's guards_state_unpickling); a warm one loads them. Prints one JSON line
(tests/python/compile/test_every_call.py)."""

from __future__ import annotations

import json
import sys

import torch

import kcache


class HelperBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def act(self, x):
        return torch.relu(x)

    def forward(self, x):
        return self.act(self.lin(x)) + x


def act_sigmoid(self, x):
    return torch.sigmoid(x) * 3.0


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(HelperBlock() for _ in range(4))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def main() -> None:
    torch.manual_seed(0)
    model = Model()
    compiled = kcache.compile_regions(model)
    x = torch.randn(4, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compiled(x).square().mean().backward()
    opt.step()  # the grads stay set: the cold run compiles the eval variant with them
    before = kcache.stats()
    if sys.argv[1:] == ["patch"]:
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


if __name__ == "__main__":
    sys.exit(main())
