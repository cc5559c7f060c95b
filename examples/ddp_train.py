"""A data-parallel training job with regional compilation: one process per rank.

Launch it with torchrun (gloo on loopback); every rank builds the same
transformers model from a config (seed 0, nothing downloaded), compiles its
repeated blocks (kcache.compile_regions, or Accelerate's compile_regions for
the no-kcache reference), trains on its own shard of random tokens and
averages gradients across ranks with an all-reduce every step.

    torchrun --standalone --nproc-per-node 4 examples/ddp_train.py --out /tmp/ddp

Each rank writes OUT/rank-R.json: seconds from launch (BENCH_T0, an epoch
time the launcher sets; else the process start) until the rank's regions
are ready (its first forward and backward done) and until its first
all-reduce, its CPU seconds, PyTorch's own compile counters, kcache's stats
and the loss at every step. --inductor-dir / --node-dir take "{rank}" so
that each rank can have a directory of its own (ranks on separate nodes).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import sys
import time
from pathlib import Path

T_START = time.time()


def parse() -> argparse.Namespace:
    # Parsed before torch is imported (the cache directories must be set
    # first), so not shared with train_regional.py, which imports torch.
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--compiler", choices=["kcache", "accelerate", "eager"], default="kcache")
    p.add_argument("--until-compiled", action="store_true",
                   help="after --steps, keep stepping until every rank runs every block compiled "
                        "(kcache's cold start without waiting; the ranks agree each step)")
    p.add_argument("--max-steps", type=int, default=100000)
    p.add_argument("--duration", type=float, default=0.0,
                   help="after --steps, keep stepping until this many seconds from launch (BENCH_T0) "
                        "have passed (the ranks agree each step): steps completed against time")
    p.add_argument("--inductor-dir", help="TORCHINDUCTOR_CACHE_DIR; {rank} is replaced")
    p.add_argument("--node-dir", help="KCACHE_LOCAL_DIR; {rank} is replaced")
    p.add_argument("--out", required=True, help="folder for rank-R.json")
    p.add_argument("--eager-check", action="store_true",
                   help="each step, also an eager copy's loss and gradients on the same weights and batch "
                        "(eager_check_diffs: the loss's distance from eager's; eager_check_grad_diffs: the "
                        "largest gradient difference, relative to eager's largest gradient)")
    p.add_argument("--kv-cache", action="store_true",
                   help="keep transformers' KV cache on (its default; each block is then traced)")
    return p.parse_args()


def step_peak_reset() -> None:
    """Resets this process's peak RSS (Linux: clear_refs 5), so that the
    next step_peak() is the peak within the step."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def step_peak() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def main() -> None:
    args = parse()
    rank = int(os.environ.get("RANK", "0"))
    # Before torch is imported: Inductor reads its cache directory once.
    if args.inductor_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.inductor_dir.format(rank=rank)
    if args.node_dir:
        os.environ["KCACHE_LOCAL_DIR"] = args.node_dir.format(rank=rank)
    t0 = float(os.environ.get("BENCH_T0", T_START))

    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from train_regional import build_model

    import kcache
    from kcache import _torch_adaptor as adaptor
    from kcache import background

    dist.init_process_group("gloo")
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = build_model(args.model, args.layers, args.hidden, args.kv_cache)
    # The eager copy of --eager-check: given the training model's weights
    # before each step, so that a compiled block's loss is compared with
    # eager's on the same parameters (the trajectories of two whole runs
    # drift apart over many steps, compiled or not).
    reference = copy.deepcopy(model) if args.eager_check else None
    if args.compiler == "kcache":
        model = kcache.compile_regions(model)
    elif args.compiler == "eager":
        pass
    else:
        from accelerate.utils import compile_regions

        model = compile_regions(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1000 + rank)  # this rank's shard
    params = [p for p in model.parameters() if p.requires_grad]

    def any_rank_compiling() -> bool:
        flag = torch.tensor([1.0 if background.compiling() else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return flag.item() > 0

    def within_duration() -> bool:
        flag = torch.tensor([1.0 if time.time() - t0 < args.duration else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return flag.item() > 0

    losses, marks, step_end_s, eager_steps, eager_check_diffs, eager_check_grad_diffs = [], {}, [], [], [], []

    def reference_params() -> dict:
        """The eager copy's parameters under the training model's names
        (a compiled block's are under its `_orig_mod`); load_state_dict
        copies into these same tensors each step."""
        ref = dict(reference.named_parameters())
        names = {n: n.replace("_orig_mod.", "") for n, _ in model.named_parameters()}
        assert sorted(names.values()) == sorted(ref), "the eager copy's parameters differ from the model's"
        return {n: ref[plain] for n, plain in names.items()}
    ref = reference_params() if reference is not None else {}
    step = 0
    step_peak_rss_mb = []
    while step < args.steps or (args.until_compiled and step < args.max_steps and any_rank_compiling()) \
            or (args.duration and within_duration()):
        step_peak_reset()
        eager_before = kcache.stats()["eager_block_calls"] if args.compiler == "kcache" else 0
        ids = torch.randint(0, 256, (args.batch, args.seq), generator=data)
        if reference is not None:
            reference.load_state_dict(model.state_dict(), strict=True)
            reference.zero_grad(set_to_none=True)
            reference_loss = reference(ids, labels=ids).loss
            reference_loss.backward()
        loss = model(ids, labels=ids).loss
        loss.backward()
        if reference is not None:
            # This rank's own gradients (before the all-reduce), against
            # eager's, relative to eager's largest.
            eager_check_diffs.append(abs(loss.item() - reference_loss.item()))
            worst = max((p.grad - ref[n].grad).abs().max().item() for n, p in model.named_parameters()
                        if p.grad is not None)
            eager_check_grad_diffs.append(worst / max(q.grad.abs().max().item() for q in ref.values()
                                                      if q.grad is not None))
        if step == 0:
            marks["regions_ready_s"] = time.time() - t0
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n
        if step == 0:
            marks["first_allreduce_s"] = time.time() - t0
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        step_end_s.append(round(time.time() - t0, 3))
        step_peak_rss_mb.append(step_peak())
        if args.compiler == "kcache" and kcache.stats()["eager_block_calls"] > eager_before:
            eager_steps.append(step)
        step += 1
    marks["done_s"] = time.time() - t0
    # When this rank's blocks all ran compiled: the end of its last step
    # with an eager block call (its first step's end when it had none).
    last_eager = eager_steps[-1] if eager_steps else 0
    marks["all_compiled_s"] = step_end_s[last_eager] if step_end_s else None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "rank": rank, "world": world, "compiler": args.compiler, **marks,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss // 1024,
        "losses": losses,
        "step_end_s": step_end_s,
        "eager_steps": eager_steps,
        # this process's peak RSS within each step (VmHWM, reset before it)
        "step_peak_rss_mb": step_peak_rss_mb,
        "eager_check_diffs": eager_check_diffs,
        "eager_check_grad_diffs": eager_check_grad_diffs,
        "timeline": background.current().timeline() if background.current() else [],
        "timeline_t0_s": background.current().t0_wall - t0 if background.current() else None,
        "counters": adaptor.counters(),
        "kcache": kcache.stats() if args.compiler == "kcache" else {},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".rank-{rank}.json.tmp"
    tmp.write_text(json.dumps(result))
    tmp.rename(out / f"rank-{rank}.json")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
