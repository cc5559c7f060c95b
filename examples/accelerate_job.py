"""The training job the distributed Accelerate examples share: argument
parsing, the per-rank cache directories, the training loop and the per-rank
result file. Each mode's script (accelerate_ddp.py, accelerate_fsdp2.py,
accelerate_deepspeed.py) only builds its Accelerator.

Every rank builds the same transformers model from a config (seed 0,
nothing downloaded), prepares it with Accelerate's regional compilation
(TorchDynamoPlugin(use_regional_compilation=True)) routed through kcache by
kcache.accelerate.install(), trains on its own shard of random tokens and
writes OUT/rank-R.json: seconds until its regions are ready (first forward
and backward), its losses, PyTorch's own compile counters, kcache's stats
and the keys of the regions it compiled or restored. With --until-compiled
(a cold start without waiting: blocks run eagerly until their regions
land) it also records which steps ran an eager block, when every block
ran compiled, and kcache's background timeline.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Callable

T_START = time.time()
HERE = Path(__file__).resolve().parent


def parse(description: str) -> argparse.Namespace:
    # Parsed before torch is imported: Inductor reads its cache directory once.
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--until-compiled", action="store_true",
                   help="after --steps, keep stepping until every rank runs every block compiled "
                        "(kcache's cold start without waiting, docs/cold-start.md; the ranks agree each step)")
    p.add_argument("--max-steps", type=int, default=100000)
    p.add_argument("--mixed-precision", default="no", choices=["no", "bf16"])
    p.add_argument("--no-kcache", action="store_true", help="Accelerate's own compile_regions")
    p.add_argument("--inductor-dir", help="TORCHINDUCTOR_CACHE_DIR; {rank} is replaced")
    p.add_argument("--node-dir", help="KCACHE_LOCAL_DIR; {rank} is replaced")
    p.add_argument("--out", required=True, help="folder for rank-R.json")
    args = p.parse_args()
    rank = os.environ.get("RANK", "0")
    if args.inductor_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.inductor_dir.format(rank=rank)
    if args.node_dir:
        os.environ["KCACHE_LOCAL_DIR"] = args.node_dir.format(rank=rank)
    return args


def cpu_only() -> bool:
    """Accelerator(cpu=...) for DDP and FSDP on a machine without GPUs.
    Accelerate 1.15 runs a multi-process CPU job as MULTI_CPU only with
    cpu=True (1.11 did without); otherwise every rank trains alone
    (DistributedType.NO, no gradient exchange). DeepSpeed must not get it:
    Accelerate refuses DeepSpeed with cpu=True."""
    import torch

    return not torch.cuda.is_available()


def train(args: argparse.Namespace, make_accelerator: Callable[[], object], mode: str) -> None:
    """Installs kcache (unless --no-kcache), builds the Accelerator, trains,
    writes this rank's result."""
    import torch

    sys.path.insert(0, str(HERE))
    from train_regional import build_model

    import kcache
    import kcache.accelerate
    import kcache.api
    from kcache import _torch_adaptor as adaptor

    if not args.no_kcache:
        kcache.accelerate.install()  # the one call: Accelerate's regional path goes through kcache
    t0 = float(os.environ.get("BENCH_T0", T_START))
    accelerator = make_accelerator()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if accelerator.num_processes != world:  # a silent single-process fall back
        raise SystemExit(f"Accelerate runs {accelerator.num_processes} process(es) as "
                         f"{accelerator.distributed_type}, but WORLD_SIZE is {world}")
    torch.manual_seed(0)
    model = build_model(args.model, args.layers, args.hidden)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = accelerator.prepare(model, opt)
    rank = accelerator.process_index
    data = torch.Generator().manual_seed(1000 + rank)  # this rank's shard
    from kcache import background

    def eager_calls() -> int:
        return 0 if args.no_kcache else kcache.stats()["eager_block_calls"]

    def any_rank_compiling() -> bool:
        flag = torch.tensor([1.0 if background.compiling() else 0.0], device=accelerator.device)
        return accelerator.reduce(flag, reduction="sum").item() > 0

    losses, marks, step_end_s, eager_steps = [], {}, [], []
    step = 0
    while step < args.steps or (args.until_compiled and step < args.max_steps and any_rank_compiling()):
        before = eager_calls()
        ids = torch.randint(0, 256, (args.batch, args.seq), generator=data)
        loss = model(ids, labels=ids).loss
        accelerator.backward(loss)
        if step == 0:
            marks["regions_ready_s"] = time.time() - t0
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        step_end_s.append(round(time.time() - t0, 3))
        if eager_calls() > before:
            eager_steps.append(step)
        step += 1
    marks["done_s"] = time.time() - t0
    # When this rank's blocks all ran compiled: the end of its last step
    # with an eager block call (its first step's end when it had none).
    marks["all_compiled_s"] = step_end_s[eager_steps[-1] if eager_steps else 0] if step_end_s else None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "rank": rank, "world": accelerator.num_processes, "mode": mode,
        "distributed_type": str(accelerator.distributed_type), "model_class": type(model).__name__,
        **marks, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss // 1024,
        "losses": losses, "step_end_s": step_end_s, "eager_steps": eager_steps,
        "timeline": background.current().timeline() if background.current() else [],
        "timeline_t0_s": background.current().t0_wall - t0 if background.current() else None,
        "counters": adaptor.counters(),
        "kcache": kcache.stats() if not args.no_kcache else {},
        "regions": kcache.api.region_outcomes() if not args.no_kcache else [],
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".rank-{rank}.json.tmp"
    tmp.write_text(json.dumps(result))
    tmp.rename(out / f"rank-{rank}.json")
    accelerator.wait_for_everyone()
    # The model (under DDP, its Reducer) goes first, while torch's registry
    # still holds the process group; end_training() then drops the group's
    # last reference through a destructor that releases the GIL. The other
    # way round, the Reducer's deallocation ends the gloo group holding the
    # GIL, joining a gloo thread that may need the GIL to free the last
    # all-reduce's saved context: a hang at exit, seen once in a loaded CI
    # run (PyTorch issue 56297; docs/distributed.md, "A DDP job that hangs
    # at its exit").
    accelerator.free_memory()
    del model, opt
    gc.collect()  # a module in a reference cycle goes now too
    accelerator.end_training()
