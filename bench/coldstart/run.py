"""Cluster cold start on one machine: N data-parallel ranks (torchrun, gloo
on loopback, examples/ddp_train.py) under six setups —

  none            no kcache: Accelerate's compile_regions, every rank compiles
  pytorch-remote  no kcache, with PyTorch's own FX-graph + AOTAutograd remote
                  caches on a real redis-server (what users pick instead)
  node            kcache's node tier only (one directory shared by the ranks)
  server-disk     kcache-server on its disk storage; each rank its own node dir
  server-redis    kcache-server on redis-server; each rank its own node dir
  precompiled     server-disk with precompiled regions (docs/precompiled.md)

node, server-disk and server-redis take kcache's traced path
(KCACHE_PRECOMPILED=0), as when they were first measured; precompiled is
the default path of kcache.compile_regions. The job keeps transformers'
default KV cache on (--kv-cache), as when the first setups were measured:
Dynamo then traces every block, and a precompiled region has one variant
per layer index (docs/precompiled.md).

— for N = 1, 4, 8, 16, each a cold wave (empty caches: a fresh server and
storage, fresh directories) followed by a restart wave (the same N ranks
again with empty Inductor cache directories: new containers; the node
setup keeps its node directory, the server setups start with empty node
directories, as ranks restarted on other nodes do).

Inductor's C++ compiler is bench/coldstart/cxx_counter.sh, which counts
every host-compiler run and its CPU seconds per rank. Every wave has a
timeout; every process started (servers, torchrun and its ranks, g++) is
stopped at the end, on a timeout and on Ctrl-C.

    .venv/bin/python bench/coldstart/run.py             # writes results.json, REPORT.md, plot.png here
    .venv/bin/python bench/coldstart/run.py --ranks 1 4 --setups none node
    .venv/bin/python bench/coldstart/run.py --setups precompiled pytorch-remote --merge
                    # replaces those setups' rows in results.json, keeps the others
    .venv/bin/python bench/coldstart/run.py --job fsdp2 --ranks 1 4 8 --setups none precompiled \
        --layers 4 --out bench/coldstart/results_4layers.json --merge

--job fsdp2 runs examples/accelerate_fsdp2.py instead (Accelerate's FSDP2
path, fully_shard per block, with kcache.accelerate.install(), or Accelerate's
own compile_regions for none / pytorch-remote, or nothing compiled for eager:
bench/coldstart/fsdp2_eager.py; docs/distributed.md): its
rows sit beside the DDP job's in the same results file and report. FSDP2
reduces gradients inside backward (reduce-scatter), so its "first
all-reduce" is the end of the first backward. Its model keeps the KV cache
off (accelerate_job.py's default). A results file's report is written next
to it: results.json -> REPORT.md, results_X.json -> REPORT_X.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import services

HERE = Path(__file__).resolve().parent
SETUPS = ("none", "pytorch-remote", "node", "server-disk", "server-redis", "precompiled", "background",
          "eager", "background-idle", "default")
# Setups on kcache's precompiled path with a server, and what KCACHE_COLD_START
# (and the worker's priority) each pins; "default" leaves both unset.
COLD_START = {"precompiled": {"KCACHE_COLD_START": "wait"},
              "background": {"KCACHE_COLD_START": "background"},
              "background-idle": {"KCACHE_COLD_START": "background", "KCACHE_WORKER_PRIORITY": "idle"},
              "default": {}}
JOBS = ("ddp", "fsdp2")


def parse_cxx_log(path: Path) -> dict[str, dict[str, float]]:
    """rank -> {"runs": all host-compiler runs, "codegen": the runs that
    wrote an object or a shared library (compiles and links, not Inductor's
    header preprocessing or kcache's -march=native query), "cpu_s": CPU
    seconds of all runs} from cxx_counter.sh's lines."""
    def secs(t: str) -> float:
        m, s = t.rstrip("s").split("m")
        return int(m) * 60 + float(s)

    out: dict[str, dict[str, float]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            rank, user, system, target = line.split()
            r = out.setdefault(rank, {"runs": 0, "codegen": 0, "cpu_s": 0.0})
            r["runs"] += 1
            r["codegen"] += target.endswith((".so", ".o"))
            r["cpu_s"] += secs(user) + secs(system)
    return out


def launch(work: Path, n: int, wave: str, setup: str, env: dict[str, str], args, timeout_s: int) -> dict:
    """One wave: N ranks under torchrun. Returns per-rank results and totals."""
    out_dir = work / f"out-{wave}"
    cxx_log = work / f"cxx-{wave}.log"
    compiler = ("accelerate" if setup in ("none", "pytorch-remote") else
                "eager" if setup == "eager" else "kcache")
    steps = args.steps
    if args.eager_steps.get(n) and (setup == "eager" or (setup == "precompiled" and wave == "cold"
                                                         and args.wait_steps_as_background)):
        steps = args.eager_steps[n]  # as many steps as the background setup's cold wave ran
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
           "--max-restarts=0"]
    common = ["--model", args.model, "--layers", str(args.layers), "--hidden", str(args.hidden),
              "--steps", str(steps), "--out", str(out_dir),
              "--inductor-dir", str(work / f"inductor-{wave}" / "rank-{rank}")]
    for name in ("batch", "seq"):  # gpu_node.py's (examples/ddp_train.py's defaults otherwise)
        if getattr(args, name, None):
            common += [f"--{name}", str(getattr(args, name))]
    if args.job == "ddp":
        cmd += [str(services.REPO / "examples" / "ddp_train.py"), *common, "--compiler", compiler]
        if not args.no_kv_cache:
            cmd.append("--kv-cache")
        if setup in ("background", "background-idle", "default") and not getattr(args, "duration", 0):
            cmd.append("--until-compiled")
        if getattr(args, "duration", 0):
            cmd += ["--duration", str(args.duration)]
        if args.eager_check:
            cmd.append("--eager-check")
    else:  # Accelerate's FSDP2 path; kcache through kcache.accelerate.install()
        script = (services.REPO / "bench" / "coldstart" / "fsdp2_eager.py" if compiler == "eager" else
                  services.REPO / "examples" / "accelerate_fsdp2.py")
        cmd += [str(script), *common]
        if compiler == "accelerate":
            cmd.append("--no-kcache")
        if setup == "background":
            cmd.append("--until-compiled")
    if setup == "node":
        cmd += ["--node-dir", str(work / "node-shared")]
    elif setup.startswith("server") or setup in COLD_START:
        cmd += ["--node-dir", str(work / f"node-{wave}" / "rank-{rank}")]
    if getattr(args, "pin", None):  # torchrun and its ranks on the training's cores (gpu_node.py)
        cmd = ["taskset", "-c", args.pin, *cmd]
    env = dict(env, COLDSTART_CXX_LOG=str(cxx_log), BENCH_T0=repr(time.time()))
    log = open(work / f"torchrun-{wave}.log", "wb")
    proc = services.track(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        services.stop(proc)
        return {"error": f"timed out after {timeout_s} s"}
    finally:
        services._started.remove(proc)
    if proc.returncode != 0:
        tail = (work / f"torchrun-{wave}.log").read_text(errors="replace")[-3000:]
        return {"error": f"torchrun exited {proc.returncode}: {tail}"}
    cxx = parse_cxx_log(cxx_log)
    ranks = []
    for r in range(n):
        res = json.loads((out_dir / f"rank-{r}.json").read_text())
        # FSDP2 reduce-scatters gradients inside backward (accelerate_job.py
        # records no separate all-reduce).
        res.setdefault("first_allreduce_s", res["regions_ready_s"])
        res["cxx_runs"] = int(cxx.get(str(r), {}).get("runs", 0))
        res["cxx_codegen"] = int(cxx.get(str(r), {}).get("codegen", 0))
        res["cxx_cpu_s"] = round(cxx.get(str(r), {}).get("cpu_s", 0.0), 2)
        ranks.append(res)
    return {
        "ranks": ranks,
        "all_ready_s": max(r["regions_ready_s"] for r in ranks),
        # every block of every rank compiled (background: after its eager phase)
        "all_compiled_s": max(r.get("all_compiled_s") or r["regions_ready_s"] for r in ranks),
        "all_first_allreduce_s": max(r["first_allreduce_s"] for r in ranks),
        "cxx_runs": sum(v["runs"] for v in cxx.values()),
        "cxx_codegen": sum(v["codegen"] for v in cxx.values()),
        "cxx_cpu_s": round(sum(v["cpu_s"] for v in cxx.values()), 2),
        "rank_cpu_s": round(sum(r["cpu_s"] for r in ranks), 1),
    }


def run_setup(root: Path, setup: str, n: int, args, base_env: dict[str, str]) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"{setup}-n{n}-", dir=root))
    env = dict(base_env)
    server = None
    try:
        if setup in ("server-disk", *COLD_START):
            server, url = services.start_server(work, f"disk:{work / 'server-data'}")
        elif setup == "server-redis":
            _, port = services.start_redis(work)
            server, url = services.start_server(work, f"redis://127.0.0.1:{port}")
        if setup == "pytorch-remote":
            _, port = services.start_redis(work)
            env.update(TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE="1", TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE="1",
                       TORCHINDUCTOR_REDIS_HOST="127.0.0.1", TORCHINDUCTOR_REDIS_PORT=str(port))
        env["KCACHE_PRECOMPILED"] = "1" if setup in COLD_START else "0"
        # precompiled: the rank that leases a region compiles it in its first
        # forward and the others wait (as first measured); background: blocks
        # eager until a compile worker's region lands; default: what kcache
        # picks (background/placement.py).
        env.update(COLD_START.get(setup, {"KCACHE_COLD_START": "wait"}))
        if server is not None:
            env["KCACHE_URL"] = url
        result = {"job": args.job, "setup": setup, "n": n}
        # Without kcache nothing survives a restart into new containers: the
        # restart wave is the cold wave again (run it with --none-restart).
        waves = ("cold", "restart") if setup not in ("none", "eager") or args.none_restart else ("cold",)
        if setup in getattr(args, "cold_only", ()):
            waves = ("cold",)
        # PyTorch's remote caches survive the restart (redis keeps them).
        for wave in waves:
            before = services.server_metrics(url) if server else {}
            res = launch(work, n, wave, setup, env, args, args.timeout)
            if server and "error" not in res:
                after = services.server_metrics(url)
                res["server"] = {k: after.get(k, 0) - before.get(k, 0) for k in (
                    "kcache_http_requests_total", "kcache_cache_hits_total", "kcache_cache_misses_total",
                    "kcache_uploads_total", "kcache_sent_bytes_total", "kcache_leases_granted_total",
                    "kcache_leases_waited_total")}
            result[wave] = res
            if setup == "background" and wave == "cold" and "error" not in res:
                args.eager_steps[n] = max(len(r["losses"]) for r in res["ranks"])
            print(f"  {args.job:5s} {setup:13s} N={n:2d} {wave:8s} "
                  + (res["error"][:200] if "error" in res else
                     f"first all-reduce {res['all_first_allreduce_s']:6.1f} s, all compiled "
                     f"{res['all_compiled_s']:6.1f} s, g++ runs {res['cxx_runs']:3d} "
                     f"({res['cxx_codegen']:3d} codegen), "
                     f"g++ CPU {res['cxx_cpu_s']:6.1f} s"), flush=True)
        return result
    finally:
        services.stop_all()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--job", choices=JOBS, default="ddp",
                   help="ddp: examples/ddp_train.py; fsdp2: examples/accelerate_fsdp2.py")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 4, 8, 16])
    p.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    p.add_argument("--model", default="gpt2")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--timeout", type=int, default=900, help="seconds per wave")
    p.add_argument("--out", type=Path, default=HERE / "results.json")
    p.add_argument("--keep", action="store_true", help="keep the work folders")
    p.add_argument("--eager-check", action="store_true",
                   help="ddp job: each step's loss also against an eager copy on the same weights "
                        "(examples/ddp_train.py --eager-check; report_same_weights.py)")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows of other setups (and ranks) already in --out")
    p.add_argument("--no-kv-cache", action="store_true",
                   help="ddp job: the model without transformers' KV cache (as training runs it)")
    p.add_argument("--none-restart", action="store_true",
                   help="also run the no-kcache setup's restart wave (a repeat of its cold wave)")
    p.add_argument("--wait-steps-as-background", action="store_true",
                   help="the precompiled (wait) setup's cold wave runs as many steps as the background "
                        "setup's (a job fully compiled from its first step, over as long: its losses' "
                        "drift from eager's beside the mixed phase's)")
    args = p.parse_args()
    args.eager_steps = {}  # N -> steps of the background setup's cold wave (the eager rows run as many)

    # SIGTERM cleans up like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    root = Path(tempfile.mkdtemp(prefix="kcache-coldstart-"))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("KCACHE_", "TORCHINDUCTOR_"))}
    base_env.update(CXX=str(HERE / "cxx_counter.sh"), TORCHINDUCTOR_COMPILE_THREADS="1",
                    OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    t0 = time.time()
    results, kept_meta = [], {}
    if args.merge and args.out.exists():
        old = json.loads(args.out.read_text())
        kept_meta = old.get("meta", {})
        results = [r for r in old["results"] if not (r.get("job", "ddp") == args.job
                                                      and r["setup"] in args.setups and r["n"] in args.ranks)]
    try:
        for n in args.ranks:
            for setup in args.setups:
                results.append(run_setup(root, setup, n, args, base_env))
                m = meta(args, t0)
                if kept_meta:
                    m = {**kept_meta, "merged": kept_meta.get("merged", []) + [m]}
                args.out.write_text(json.dumps({"meta": m, "results": results}, indent=1))
    except KeyboardInterrupt:
        print("interrupted: stopping every process started", file=sys.stderr)
        raise SystemExit(130)
    finally:
        services.stop_all()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if "background" in args.setups:  # issue 51's comparison has its own report
        import report_background

        report_background.write(args.out, *report_background.outputs_for(args.out))
        return
    import report

    report.write(args.out, *report.outputs_for(args.out))


def meta(args, t0: float) -> dict:
    import platform

    import torch

    return {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "model": args.model, "layers": args.layers,
            "hidden": args.hidden, "steps": args.steps, "elapsed_s": round(time.time() - t0),
            "job": args.job, "command": ".venv/bin/python bench/coldstart/run.py " + " ".join(sys.argv[1:])}


if __name__ == "__main__":
    main()
