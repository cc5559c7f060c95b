"""The cold start as a GPU node sees it, simulated on this machine's CPUs,
and the choice kcache makes where the compile would share the training's
cores (docs/cold-start.md, "Which mode").

--layout pinned (a GPU node): torchrun and its ranks run on the training's
core(s) only (taskset -c 0, one intra-op thread each), and each rank's
compile worker on the other core(s) (KCACHE_WORKER_CPUS): the compile
leaves the training's speed untouched, as on a node whose training runs on
the GPU while the host's cores are idle. In wait mode the rank compiles on
its own core, as fast as the worker does on its own.

--layout shared (the README's demo): one rank, torch's default threads (all
cores) and Inductor's default compile threads, nothing pinned: the worker,
when there is one, competes with the training for every core.

Every run trains for --duration seconds from launch (examples/ddp_train.py
--duration) and records each step's end and its peak RSS (VmHWM, reset
before the step), the blocks' eager steps and, from each compile worker,
its peak RSS. Setups (run.py's): eager (nothing compiled), precompiled
(KCACHE_COLD_START=wait), background (a compile worker; its restart wave is
a fresh job on the warm server), background-idle (the worker at SCHED_IDLE
priority), default (KCACHE_COLD_START unset: kcache's own choice).

    .venv/bin/python bench/coldstart/gpu_node.py                  # pinned: results_gpu_node.json
    .venv/bin/python bench/coldstart/gpu_node.py --layout shared  # results_placement.json

The report and plot are written next to the results file (report_gpu_node.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import run
import services

HERE = Path(__file__).resolve().parent
LAYOUTS = {
    "pinned": {"setups": ["eager", "precompiled", "background"], "ranks": [1, 2], "models": ["gpt2", "llama"],
               "layers": 12, "hidden": 128, "seq": 64, "batch": 4, "duration": 125.0,
               "out": HERE / "results_gpu_node.json"},
    "shared": {"setups": ["precompiled", "background", "background-idle", "default"], "ranks": [1],
               "models": ["gpt2"], "layers": 12, "hidden": 64, "seq": 32, "batch": 2, "duration": 305.0,
               "out": HERE / "results_placement.json"},
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--layout", choices=sorted(LAYOUTS), default="pinned")
    p.add_argument("--setups", nargs="+", choices=run.SETUPS)
    p.add_argument("--ranks", type=int, nargs="+")
    p.add_argument("--models", nargs="+", choices=["gpt2", "llama"])
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--duration", type=float, help="seconds each wave trains from launch")
    p.add_argument("--training-cpus", default="0", help="pinned: the ranks' cores")
    p.add_argument("--worker-cpus", default="1", help="pinned: the compile workers' cores")
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    layout = LAYOUTS[args.layout]
    for name in ("setups", "ranks", "models", "layers", "hidden", "seq", "batch", "duration", "out"):
        if getattr(args, name) is None:
            setattr(args, name, layout[name])
    # what run.launch / run.run_setup read
    args.job, args.steps, args.keep, args.eager_check = "ddp", 1, False, False
    args.no_kv_cache, args.none_restart, args.wait_steps_as_background = True, False, False
    # the restart wave after background's cold one (pinned: a curve of its own)
    args.cold_only = ("precompiled", "background-idle", "default", "eager") + \
        (("background",) if args.layout == "shared" else ())
    args.pin = args.training_cpus if args.layout == "pinned" else None

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    root = Path(tempfile.mkdtemp(prefix="kcache-gpu-node-"))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("KCACHE_", "TORCHINDUCTOR_", "OMP_"))}
    base_env.update(CXX=str(HERE / "cxx_counter.sh"), PYTHONFAULTHANDLER="1")
    if args.layout == "pinned":  # one core each: the rank's compile (wait) and the worker's
        base_env.update(OMP_NUM_THREADS="1", KCACHE_WORKER_CPUS=args.worker_cpus, TORCHINDUCTOR_COMPILE_THREADS="1")
    t0 = time.time()
    results = []
    try:
        for model in args.models:
            for n in args.ranks:
                for setup in args.setups:
                    args.model, args.eager_steps = model, {}
                    row = run.run_setup(root, setup, n, args, base_env)
                    row.update(model=model, layout=args.layout)
                    results.append(row)
                    args.out.write_text(json.dumps({"meta": meta(args, t0), "results": results}, indent=1))
    except KeyboardInterrupt:
        print("interrupted: stopping every process started", file=sys.stderr)
        raise SystemExit(130)
    finally:
        services.stop_all()
        shutil.rmtree(root, ignore_errors=True)
    import report_gpu_node

    report_gpu_node.write(args.out)


def meta(args, t0: float) -> dict:
    import platform

    import torch

    return {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.machine(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "layout": args.layout, "models": args.models, "layers": args.layers,
            "hidden": args.hidden, "seq": args.seq, "batch": args.batch, "duration_s": args.duration,
            "ranks": args.ranks, "setups": args.setups,
            "training_cpus": args.pin, "worker_cpus": args.worker_cpus if args.pin else None,
            "load_average_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "elapsed_s": round(time.time() - t0),
            "command": ".venv/bin/python bench/coldstart/gpu_node.py " + " ".join(sys.argv[1:])}


if __name__ == "__main__":
    main()
