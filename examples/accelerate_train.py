"""Accelerate's regional compilation through kcache, with mixed precision.

    python examples/accelerate_train.py --steps 3

Prints one JSON line: losses, PyTorch's compile counters, kcache's stats.
"""

from __future__ import annotations

import argparse
import json

import torch
from accelerate import Accelerator
from accelerate.utils import TorchDynamoPlugin
from transformers import GPT2Config, GPT2LMHeadModel

import kcache
import kcache.accelerate
import kcache.api
from kcache import _torch_adaptor as adaptor


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--mixed-precision", default="bf16")
    p.add_argument("--no-kcache", action="store_true")
    args = p.parse_args()

    if not args.no_kcache:
        kcache.accelerate.install()
    accelerator = Accelerator(
        mixed_precision=args.mixed_precision,
        dynamo_plugin=TorchDynamoPlugin(backend="inductor", use_regional_compilation=True))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=128, n_positions=64,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = accelerator.prepare(model, opt)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    losses = []
    for _ in range(args.steps):
        loss = model(ids, labels=ids).loss
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    c = adaptor.counters()
    print(json.dumps({"losses": losses, "inductor": c.get("inductor", {}),
                      "aot_autograd": c.get("aot_autograd", {}), "stats": c.get("stats", {}),
                      "kcache": kcache.stats(), "regions": kcache.api.region_outcomes()}))


if __name__ == "__main__":
    main()
