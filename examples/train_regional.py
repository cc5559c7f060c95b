"""A small real training job with kcache regional compilation.

Builds a transformers model from a config (random weights, nothing
downloaded), compiles its repeated blocks with kcache.compile_regions, runs a
few AdamW steps and prints one JSON line: compile+first-step seconds, step
seconds, losses, PyTorch's own compile counters and kcache's stats.

    python examples/train_regional.py --model gpt2 --layers 2 --steps 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

import torch


def build_model(family: str, layers: int, hidden: int):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if family == "gpt2":
        cfg = GPT2Config(n_embd=hidden, n_layer=layers, n_head=2, vocab_size=256, n_positions=128,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return GPT2LMHeadModel(cfg)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=2, vocab_size=256,
                      max_position_embeddings=128)
    return LlamaForCausalLM(cfg)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--mode", default=None)
    p.add_argument("--compiler", choices=["kcache", "accelerate", "eager"], default="kcache")
    args = p.parse_args()

    import kcache
    from kcache import _torch_adaptor as adaptor

    torch.manual_seed(0)
    model = build_model(args.model, args.layers, args.hidden)
    kwargs = {"mode": args.mode} if args.mode else {}
    if args.compiler == "kcache":
        model = kcache.compile_regions(model, **kwargs)
    elif args.compiler == "accelerate":
        from accelerate.utils import compile_regions

        model = compile_regions(model, **kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 256, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))

    losses, step_times, grad_sha256 = [], [], None
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = model(ids, labels=ids).loss
        loss.backward()
        if grad_sha256 is None:  # the first step's gradients, bit for bit
            h = hashlib.sha256()
            for p_ in model.parameters():
                if p_.grad is not None:
                    h.update(p_.grad.detach().contiguous().numpy().tobytes())
            grad_sha256 = h.hexdigest()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    c = adaptor.counters()
    print(json.dumps({
        "compiler": args.compiler,
        "first_step_s": round(step_times[0], 3),
        "later_step_s": round(sum(step_times[1:]) / max(1, len(step_times) - 1), 4),
        "losses": losses,
        "grad_sha256": grad_sha256,
        "inductor": c.get("inductor", {}),
        "aot_autograd": c.get("aot_autograd", {}),
        "kcache": kcache.stats() if args.compiler == "kcache" else {},
        "pid": os.getpid(),
        # What decides the generated code's float order, for a report that
        # compares two runs: the vector ISA Inductor picked and the threads.
        "vec_isa": adaptor.cpu_vec_isa() if args.compiler != "eager" else None,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
