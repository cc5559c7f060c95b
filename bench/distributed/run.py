"""Accelerate's distributed modes with kcache: a cold wave and a restart wave
of N ranks (torchrun, gloo on loopback) per mode, sharing one fresh
kcache-server (disk storage) per mode and N.

  ddp             examples/accelerate_ddp.py
  fsdp2           examples/accelerate_fsdp2.py (fully_shard per block)
  deepspeed-z2    examples/accelerate_deepspeed.py --zero-stage 2
  deepspeed-z3    examples/accelerate_deepspeed.py --zero-stage 3
  ddp-background  examples/accelerate_ddp.py --until-compiled, kcache's default
                  cold start (docs/cold-start.md: blocks eager until their
                  region lands); the other modes pin KCACHE_COLD_START=wait
  deepspeed-z2-background
                  examples/accelerate_deepspeed.py --zero-stage 2
                  --until-compiled, the same for DeepSpeed's in-place blocks
  deepspeed-z3-background
                  examples/accelerate_deepspeed.py --zero-stage 3
                  --until-compiled, the same for ZeRO 3's blocks (the traced
                  path: graphs eager until the worker's compile of each
                  lands, docs/cold-start.md "The traced path off the thread")
  fsdp2-background
                  examples/accelerate_fsdp2.py --until-compiled, the same
                  for FSDP2's blocks (hooks eager around a precompiled
                  forward: docs/precompiled.md)
  fsdp2-llama-background
                  the same with Llama's decoder layers (--model llama)

Every rank has its own empty Inductor and node directories in both waves
(the restart wave is the same job restarted in new containers). The host
compiler is bench/coldstart/cxx_counter.sh: the cold wave shows kernel
builds (the positive control), the restart wave must show none. Recorded per
wave: time until every rank's regions are ready, kernel builds, PyTorch's
FX-graph and AOTAutograd cache misses, the server's lease and hit counters,
every rank's losses and region keys. Verdicts are computed in report.py.

DeepSpeed is not in the project's pinned environment; run this with a
Python that has it (bench/distributed/setup_deepspeed.sh makes one):

    .venv/bin/python bench/distributed/run.py --modes ddp fsdp2 --ranks 2 4
    .venv-deepspeed/bin/python bench/distributed/run.py        # all modes, N = 2 and 4
    .venv/bin/python bench/distributed/run.py --report          # REPORT.md from results.json

Rows are keyed by mode, N and the Accelerate release they ran with, so a
run from another environment (DeepSpeed against Accelerate 1.15:
`ACCELERATE=1.15.0 TRANSFORMERS=5.24.0 bench/distributed/setup_deepspeed.sh DIR`)
adds rows with --merge instead of replacing the pinned release's. A venv
outside this checkout (setup_deepspeed.sh DIR) imports the kcache installed
in .venv: put this checkout's first with PYTHONPATH=compile (a built
_core in compile/kcache), and name the server with KCACHE_SERVER_BIN when
this checkout has no build/dev.
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

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "coldstart"))  # after HERE: report is this folder's
import services  # noqa: E402  (bench/coldstart/services.py)


def _coldstart_run():
    import importlib.util

    spec = importlib.util.spec_from_file_location("coldstart_run", HERE.parent / "coldstart" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


parse_cxx_log = _coldstart_run().parse_cxx_log

MODES = {
    "ddp": ["accelerate_ddp.py"],
    "fsdp2": ["accelerate_fsdp2.py"],
    "deepspeed-z2": ["accelerate_deepspeed.py", "--zero-stage", "2"],
    "deepspeed-z3": ["accelerate_deepspeed.py", "--zero-stage", "3"],
    "ddp-background": ["accelerate_ddp.py", "--until-compiled"],
    "deepspeed-z2-background": ["accelerate_deepspeed.py", "--zero-stage", "2", "--until-compiled"],
    "deepspeed-z3-background": ["accelerate_deepspeed.py", "--zero-stage", "3", "--until-compiled"],
    "fsdp2-background": ["accelerate_fsdp2.py", "--until-compiled"],
    "fsdp2-llama-background": ["accelerate_fsdp2.py", "--model", "llama", "--until-compiled"],
}
METRICS = ("kcache_leases_granted_total", "kcache_leases_waited_total", "kcache_cache_hits_total",
           "kcache_cache_misses_total", "kcache_uploads_total")


def wave(work: Path, mode: str, n: int, name: str, url: str, args) -> dict:
    out = work / f"out-{name}"
    cxx_log = work / f"cxx-{name}.log"
    script, *extra = MODES[mode]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
           "--max-restarts=0", str(services.REPO / "examples" / script), *extra,
           "--layers", str(args.layers), "--steps", str(args.steps), "--out", str(out),
           "--inductor-dir", str(work / f"inductor-{name}" / "rank-{rank}"),
           "--node-dir", str(work / f"node-{name}" / "rank-{rank}")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KCACHE_", "TORCHINDUCTOR_"))}
    cold_start = "" if mode.endswith("-background") else "wait"  # as first measured (docs/cold-start.md)
    env.update(KCACHE_URL=url, KCACHE_COLD_START=cold_start,
               CXX=str(HERE.parent / "coldstart" / "cxx_counter.sh"),
               COLDSTART_CXX_LOG=str(cxx_log), BENCH_T0=repr(time.time()), OMP_NUM_THREADS="1",
               TORCHINDUCTOR_COMPILE_THREADS="1", PYTHONFAULTHANDLER="1")
    before = services.server_metrics(url)
    log = open(work / f"torchrun-{name}.log", "wb")
    proc = services.track(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))
    try:
        proc.wait(args.timeout)
    except subprocess.TimeoutExpired:
        services.stop(proc)
        return {"error": f"timed out after {args.timeout} s"}
    finally:
        services._started.remove(proc)
    if proc.returncode != 0:
        tail = (work / f"torchrun-{name}.log").read_text(errors="replace")[-3000:]
        return {"error": f"torchrun exited {proc.returncode}: {tail}"}
    after = services.server_metrics(url)
    cxx = parse_cxx_log(cxx_log)
    ranks = []
    for r in range(n):
        res = json.loads((out / f"rank-{r}.json").read_text())
        c = res.pop("counters")
        ranks.append({
            "rank": r, "model_class": res["model_class"], "ready_s": round(res["regions_ready_s"], 2),
            "losses": res["losses"], "keys": sorted(x["key"] for x in res["regions"]),
            "paths": sorted({x["path"].split(" ")[0] for x in res["regions"]}),
            "fxgraph_misses": c.get("inductor", {}).get("fxgraph_cache_miss", 0),
            "autograd_misses": c.get("aot_autograd", {}).get("autograd_cache_miss", 0),
            "fxgraph_hits": c.get("inductor", {}).get("fxgraph_cache_hit", 0),
            "fxgraph_bypasses": c.get("inductor", {}).get("fxgraph_cache_bypass", 0),
            "autograd_bypasses": c.get("aot_autograd", {}).get("autograd_cache_bypass", 0),
            "not_stored": res["kcache"].get("bypassed", 0),
            "kcache_client": res["kcache"]["client"],
            "kernel_builds": int(cxx.get(str(r), {}).get("codegen", 0)),
            "steps": len(res["losses"]), "eager_steps": res.get("eager_steps", []),
            "all_compiled_s": res.get("all_compiled_s"),
            "timeline": [{k: j.get(k) for k in ("region", "state", "by", "eager_calls", "path")}
                         for j in res.get("timeline", [])],
            "kcache_background": {k: res["kcache"].get(k, 0) for k in (
                "eager_block_calls", "background_jobs", "regions_switched", "background_refusals",
                "background_faults", "background_compile_seconds")},
        })
    return {"ranks": ranks, "all_ready_s": max(r["ready_s"] for r in ranks),
            "kernel_builds": sum(r["kernel_builds"] for r in ranks),
            "server": {k: after.get(k, 0) - before.get(k, 0) for k in METRICS}}


def run_mode(root: Path, mode: str, n: int, args) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"{mode}-n{n}-", dir=root))
    try:
        _, url = services.start_server(work, f"disk:{work / 'server-data'}")
        result = {"mode": mode, "n": n, "versions": versions(), "kcache_rev": kcache_rev()}
        for name in ("cold", "restart"):
            res = wave(work, mode, n, name, url, args)
            result[name] = res
            print(f"  {mode:13s} N={n} {name:8s} " + (res["error"][:300] if "error" in res else
                  f"ready {res['all_ready_s']:6.1f} s, kernel builds {res['kernel_builds']:3d}, "
                  f"leases {res['server']['kcache_leases_granted_total']:.0f}"), flush=True)
            if "error" in res:
                break
        return result
    finally:
        services.stop_all()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--timeout", type=int, default=1200, help="seconds per wave")
    p.add_argument("--out", type=Path, default=HERE / "results.json")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--merge", action="store_true", help="keep rows of other modes/ranks in --out")
    p.add_argument("--report", action="store_true", help="only write REPORT.md from --out")
    args = p.parse_args()
    import report

    if args.report:
        report.write(args.out, HERE / "REPORT.md")
        return
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    root = Path(tempfile.mkdtemp(prefix="kcache-distributed-"))
    results, earlier = [], []
    if args.merge and args.out.exists():
        old = json.loads(args.out.read_text())
        earlier = old["meta"].get("earlier_runs", []) + [{k: old["meta"][k] for k in ("command", "date")}]
        for r in results:  # rows from before rows carried versions ran with that run's
            r.setdefault("versions", old["meta"]["versions"])
        mine = versions()["accelerate"]
        # A row is replaced by one of the same mode, N and Accelerate release
        # (rows from before rows carried versions ran with the run's own).
        results = [r for r in old["results"] if not (
            r["mode"] in args.modes and r["n"] in args.ranks
            and r.get("versions", old["meta"]["versions"])["accelerate"] == mine)]
    t0 = time.time()
    try:
        for n in args.ranks:
            for mode in args.modes:
                results.append(run_mode(root, mode, n, args))
                m = dict(meta(args, t0), earlier_runs=earlier) if earlier else meta(args, t0)
                args.out.write_text(json.dumps({"meta": m, "results": results}, indent=1))
    except KeyboardInterrupt:
        raise SystemExit(130)
    finally:
        services.stop_all()
        shutil.rmtree(root, ignore_errors=True)
    report.write(args.out, HERE / "REPORT.md")


def kcache_rev() -> str:
    """The checkout's commit, with "+changes" when kcache's code differs from it."""
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(services.REPO), *a], capture_output=True, text=True).stdout.strip()

    rev = git("rev-parse", "--short", "HEAD") or "unknown"
    return rev + ("+changes" if git("status", "--porcelain", "compile", "examples") else "")


def versions() -> dict[str, str | None]:
    import importlib.metadata as md

    def version(name: str) -> str | None:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    return {k: version(k) for k in ("torch", "transformers", "accelerate", "deepspeed")}


def meta(args, t0: float) -> dict:
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
            "versions": versions(),
            "layers": args.layers, "steps": args.steps, "elapsed_s": round(time.time() - t0),
            "command": f"{sys.executable} bench/distributed/run.py " + " ".join(sys.argv[1:])}


if __name__ == "__main__":
    main()
