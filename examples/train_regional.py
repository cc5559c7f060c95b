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
import logging
import os
import time

T_START = time.perf_counter()

import torch


def build_model(family: str, layers: int, hidden: int, kv_cache: bool = False):
    """A model from a config. Training needs no KV cache (use_cache=False, as
    Trainer sets it with gradient checkpointing); kv_cache=True keeps
    transformers' default, where each block writes its own cache layer."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if family == "gpt2":
        cfg = GPT2Config(n_embd=hidden, n_layer=layers, n_head=2, vocab_size=256, n_positions=128,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=kv_cache)
        return GPT2LMHeadModel(cfg)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=2, vocab_size=256,
                      max_position_embeddings=128, use_cache=kv_cache)
    return LlamaForCausalLM(cfg)


class DynamoTraces(logging.Handler):
    """The code objects Dynamo starts tracing, from PyTorch's own step log
    ("torchdynamo start tracing <name> <file>:<line>")."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.traced: list[str] = []
        logger = logging.getLogger("torch._dynamo.symbolic_convert")
        logger.setLevel(logging.INFO)
        logger.addHandler(self)
        logger.propagate = False

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "torchdynamo start tracing" in msg:
            self.traced.append(msg.split("torchdynamo start tracing", 1)[1].strip())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--mode", default=None)
    p.add_argument("--compiler", choices=["kcache", "kcache-in-place", "accelerate", "eager"], default="kcache")
    p.add_argument("--kv-cache", action="store_true", help="keep the model's KV cache on")
    p.add_argument("--until-compiled", action="store_true",
                   help="after --steps, keep stepping until every block runs compiled (kcache's cold "
                        "start without waiting: blocks run eagerly while a compile worker builds them)")
    p.add_argument("--mega-cache-load", help="torch.compiler.load_cache_artifacts() this file first")
    p.add_argument("--mega-cache-save", help="torch.compiler.save_cache_artifacts() to this file")
    args = p.parse_args()
    if args.mega_cache_load:  # PyTorch's own portable caches (a reference in bench/warmstart)
        with open(args.mega_cache_load, "rb") as f:
            torch.compiler.load_cache_artifacts(f.read())

    import kcache
    import kcache.api
    from kcache import _torch_adaptor as adaptor

    traces = DynamoTraces()
    t_imported = time.perf_counter()
    torch.manual_seed(0)
    model = build_model(args.model, args.layers, args.hidden, args.kv_cache)
    t_built = time.perf_counter()
    kwargs = {"mode": args.mode} if args.mode else {}
    if args.compiler == "kcache":
        model = kcache.compile_regions(model, **kwargs)
    elif args.compiler == "kcache-in-place":  # DeepSpeed's and Accelerate 1.12+'s FSDP2 way
        kcache.compile_regions_in_place(model, **kwargs)
    elif args.compiler == "accelerate":
        from accelerate.utils import compile_regions

        model = compile_regions(model, **kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 256, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))

    t_wrapped = time.perf_counter()

    def compiling() -> bool:
        from kcache import background

        return args.compiler.startswith("kcache") and background.compiling()

    losses, step_times, grad_sha256 = [], [], None
    eager_steps, step_end_s = [], []
    all_grads = hashlib.sha256()  # every step's gradients, bit for bit
    while len(losses) < args.steps or (args.until_compiled and compiling()):
        eager_before = kcache.stats()["eager_block_calls"] if args.compiler.startswith("kcache") else 0
        t0 = time.perf_counter()
        loss = model(ids, labels=ids).loss
        loss.backward()
        h = hashlib.sha256()
        for p_ in model.parameters():
            if p_.grad is not None:
                h.update(p_.grad.detach().contiguous().numpy().tobytes())
        all_grads.update(h.digest())
        if grad_sha256 is None:  # the first step's gradients
            grad_sha256 = h.hexdigest()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        step_end_s.append(time.perf_counter() - T_START)
        if args.compiler.startswith("kcache") and kcache.stats()["eager_block_calls"] > eager_before:
            eager_steps.append(len(losses) - 1)
    if args.mega_cache_save:
        saved = torch.compiler.save_cache_artifacts()
        with open(args.mega_cache_save, "wb") as f:
            f.write(saved[0] if saved else b"")
    c = adaptor.counters()
    print(json.dumps({
        "compiler": args.compiler,
        "first_step_s": round(step_times[0], 3),
        "later_step_s": round(sum(step_times[1:]) / max(1, len(step_times) - 1), 4),
        "losses": losses,
        # Steps in which some block ran eagerly (its region still compiling
        # elsewhere), and when the last of them ended (seconds since start).
        "eager_steps": eager_steps,
        "all_compiled_s": round(step_end_s[eager_steps[-1]], 3) if eager_steps else None,
        "grad_sha256": grad_sha256,
        "all_grads_sha256": all_grads.hexdigest(),
        # Where the time to the first step went (seconds since the process
        # started: imports, model build, compile_regions, first step).
        "breakdown": {"imports_s": round(t_imported - T_START, 3),
                      "build_s": round(t_built - t_imported, 3),
                      "wrap_s": round(t_wrapped - t_built, 3),
                      "first_step_s": round(step_times[0], 3),
                      "to_first_step_s": round(t_wrapped - T_START + step_times[0], 3)},
        "dynamo_traced": traces.traced,
        "stats": c.get("stats", {}),
        "inductor": c.get("inductor", {}),
        "aot_autograd": c.get("aot_autograd", {}),
        "kcache": kcache.stats() if args.compiler.startswith("kcache") else {},
        "regions": kcache.api.region_outcomes() if args.compiler.startswith("kcache") else [],
        "pid": os.getpid(),
        # What decides the generated code's float order, for a report that
        # compares two runs: the vector ISA Inductor picked and the threads.
        "vec_isa": adaptor.cpu_vec_isa() if args.compiler != "eager" else None,
        "threads": torch.get_num_threads(),
        # Inductor's compiler modules this process imported: none on a warm
        # start from precompiled regions (docs/precompiled.md).
        "compiler_modules": adaptor.compiler_modules_imported(),
    }))


if __name__ == "__main__":
    main()
