"""Warm starts against PyTorch's own caches: time to the first training step.

Every cell is its own fresh process running examples/train_regional.py
(training, AdamW) with its own Inductor directory unless the cell is about
reusing one. In one run, per model configuration:

  eager                 no compile: the reference every overhead subtracts
  cold regional         Accelerate's compile_regions, empty Inductor dir
  pytorch warm dir      the same, reusing the cold run's Inductor dir
  pytorch mega-cache    save_cache_artifacts() after a cold run, loaded into
                        a fresh dir (PyTorch's portable caches)
  pytorch remote        FX-graph + AOTAutograd remote caches on a real
                        redis-server, warm, fresh dir (what a user gets
                        without kcache; a cold run fills redis first)
  kcache traced         kcache-server warm, KCACHE_PRECOMPILED=0, fresh
                        node tier and Inductor dir (a cold run fills it)
  kcache precompiled    the same with precompiled regions (the default)

Compile overhead = time to first step - eager's time to first step, both
from process start (imports, model build, compile or load, first step);
the targets use it paired per round and in the phases whose code differs
(wrap + first step: paired_overheads), since imports and the model build
run the same code in every cell and their difference is the VM's drift.
Eager, the warm local dir and kcache's two warm setups run REPEATS times in
interleaved rounds (each kcache run with fresh node and Inductor dirs) and
report their medians; every other cell runs once. Each configuration gets
its own redis-server and kcache-server.

    .venv/bin/python bench/warmstart/run.py              # writes results.json, REPORT.md, plot.png
    .venv/bin/python bench/warmstart/run.py --quick      # GPT-2, 12 blocks only
    .venv/bin/python bench/warmstart/run.py --report     # REPORT.md and plot from results.json
    .venv/bin/python bench/warmstart/run.py --configs gpt2-24 --merge   # add to results.json
    .venv-torch2.14/bin/python bench/warmstart/run.py --quick --repeats 3 \
        --out bench/warmstart/results-torch2.14.json   # one torch release's row (docs/torch-support.md)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench" / "coldstart"))
import services  # noqa: E402

sys.path.insert(0, str(HERE))  # this directory's report.py, not coldstart's

JOB = REPO / "examples" / "train_regional.py"
STEPS = 2
HIDDEN = 64
REPEATS = 5  # the cells the targets compare run this often; each reports its median


def run_cell(work: Path, model: str, layers: int, tag: str, compiler: str, inductor: str,
             **env_extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KCACHE_", "TORCHINDUCTOR_"))}
    # The temp dir goes with the Inductor dir: PyTorch keeps its precompiled
    # kernel header there (outside the Inductor dir), so a cell on a fresh
    # Inductor dir is a fresh container, and the warm local dir keeps the
    # cold run's header as a warm node would.
    tmp = work / f"tmp-{inductor}"
    tmp.mkdir(exist_ok=True)
    env.update(TORCHINDUCTOR_CACHE_DIR=str(work / inductor), TMPDIR=str(tmp), KCACHE_COLD_START="wait",
               **env_extra)  # cold runs compile in their own process (docs/cold-start.md: the background default is bench/coldstart's)
    extra = env.pop("JOB_ARGS", "").split()
    cmd = [sys.executable, str(JOB), "--model", model, "--layers", str(layers), "--hidden",
           str(HIDDEN), "--steps", str(STEPS), "--compiler", compiler, *extra]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{tag}: {cmd} failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    cell = {"tag": tag, "process_s": round(time.perf_counter() - t0, 3),
            "to_first_step_s": r["breakdown"]["to_first_step_s"], "breakdown": r["breakdown"],
            "losses": r["losses"][:1], "dynamo_traces": len(r["dynamo_traced"]),
            "fxgraph_miss": r["inductor"].get("fxgraph_cache_miss", 0),
            "fxgraph_hit": r["inductor"].get("fxgraph_cache_hit", 0),
            "autograd_miss": r["aot_autograd"].get("autograd_cache_miss", 0),
            "compiler_modules": r.get("compiler_modules")}
    if r.get("kcache"):
        k = r["kcache"]
        cell["kcache"] = {n: k[n] for n in ("hits_node", "hits_server", "misses", "compiles",
                                            "precompiled_traces", "precompiled_blocks",
                                            "precompiled_load_seconds", "precompiled_fallbacks",
                                            "precompiled_checks_run", "precompiled_check_seconds",
                                            "precompiled_check_failures", "precompiled_first_call_seconds",
                                            "precompiled_fetch_seconds", "precompiled_deserialize_seconds",
                                            "isa_probes_run", "machine_facts_hits", "machine_facts_refused")
                         if n in k}
    print(f"  {tag:28s} first step at {cell['to_first_step_s']:7.2f} s "
          f"(traces {cell['dynamo_traces']})", flush=True)
    return cell


def cpu_facts() -> dict:
    """The CPU's model and widest x86 vector extension, from /proc/cpuinfo
    (the report says which kind of host made the figures)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), []))
    widest = next((f for f in ("avx512f", "avx2", "sse4_2") if f in flags), "other")
    return {"cpu_model": model, "vector_isa": widest}


def median_of(cells: list[dict]) -> dict:
    """The median (by time to first step) of fresh-process runs of one
    setup; every run's time is kept in runs_s, and each part of the
    breakdown's median over the runs in breakdown_median."""
    ordered = sorted(cells, key=lambda c: c["to_first_step_s"])
    cell = dict(ordered[len(ordered) // 2])
    cell["runs_s"] = [c["to_first_step_s"] for c in cells]
    parts = {k: [c["breakdown"][k] for c in cells] for k in cells[0]["breakdown"]}
    for k in cells[0].get("kcache", {}):
        parts[k] = [c["kcache"][k] for c in cells]
    cell["breakdown_median"] = {k: round(statistics.median(v), 4) for k, v in parts.items()}
    if "isa_probes_run" in cells[0].get("kcache", {}):  # every fresh container's, not the median's
        cell["isa_probes_per_run"] = [c["kcache"]["isa_probes_run"] for c in cells]
        cell["machine_facts_hits_per_run"] = [c["kcache"]["machine_facts_hits"] for c in cells]
    return cell


def compile_phases(cell: dict) -> float:
    """Seconds of the phases where a setup's code differs from eager's: the
    wrap (compile_regions, or nothing) and the first step (the compile or
    the load, and the step). Imports and the model build run the same code
    in every cell (the job imports kcache in all of them)."""
    return cell["breakdown"]["wrap_s"] + cell["breakdown"]["first_step_s"]


def paired_overheads(rounds: dict[str, list[dict]]) -> dict[str, dict]:
    """Per setup, the median over rounds of its difference to the same
    round's eager run: in the compile phases only (phase_overhead_s) and
    from process start (paired_overhead_s). The VM's drift (page-cache
    reclaim slows imports for minutes) moves both runs of a round alike;
    the phases before the wrap run the same code in both, so their
    difference is that drift, which the phase measure leaves out."""
    out = {}
    for name, runs in rounds.items():
        if name == "eager":
            continue
        pairs = list(zip(runs, rounds["eager"]))
        out[name] = {
            "phase_overhead_s": round(statistics.median(compile_phases(r) - compile_phases(e)
                                                        for r, e in pairs), 3),
            "paired_overhead_s": round(statistics.median(r["to_first_step_s"] - e["to_first_step_s"]
                                                         for r, e in pairs), 3)}
    return out


def configuration(work: Path, model: str, layers: int, redis_port: int, url: str,
                  repeats: int = REPEATS) -> dict:
    name = f"{model}-{layers}"
    print(f"{name}:", flush=True)
    w = work / name
    w.mkdir()
    c = {}
    # The cold cells, and the one-off warm ones, once each.
    c["cold_regional"] = run_cell(w, model, layers, "cold regional", "accelerate", "ind-local",
                                  JOB_ARGS=f"--mega-cache-save {w / 'mega.bin'}")
    c["pytorch_mega_cache"] = run_cell(w, model, layers, "pytorch mega-cache", "accelerate",
                                       "ind-mega", JOB_ARGS=f"--mega-cache-load {w / 'mega.bin'}")
    remote = dict(TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE="1", TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE="1",
                  TORCHINDUCTOR_REDIS_HOST="127.0.0.1", TORCHINDUCTOR_REDIS_PORT=str(redis_port))
    run_cell(w, model, layers, "(pytorch remote, filling)", "accelerate", "ind-remote-cold", **remote)
    c["pytorch_remote"] = run_cell(w, model, layers, "pytorch remote caches", "accelerate",
                                   "ind-remote-warm", **remote)
    flags = {"traced": "0", "precompiled": "1"}
    for path, flag in flags.items():
        c[f"kcache_{path}_cold"] = run_cell(w, model, layers, f"kcache {path} cold", "kcache",
                                            f"ind-kc-{path}-cold", KCACHE_URL=url,
                                            KCACHE_PRECOMPILED=flag,
                                            KCACHE_LOCAL_DIR=str(w / f"node-{path}-cold"))
    # The cells the targets compare, in interleaved rounds: this VM's speed
    # drifts (page-cache reclaim makes imports slower for minutes at a
    # time), and a round-robin gives every setup the same share of it.
    rounds: dict[str, list[dict]] = {k: [] for k in ("eager", "pytorch_warm_dir", "kcache_traced",
                                                      "kcache_precompiled")}
    for i in range(repeats):
        rounds["eager"].append(run_cell(w, model, layers, "eager", "eager", "ind-eager"))
        rounds["pytorch_warm_dir"].append(run_cell(w, model, layers, "pytorch warm Inductor dir",
                                                   "accelerate", "ind-local"))
        for path, flag in flags.items():
            rounds[f"kcache_{path}"].append(run_cell(
                w, model, layers, f"kcache {path} warm", "kcache", f"ind-kc-{path}-warm-{i}",
                KCACHE_URL=url, KCACHE_PRECOMPILED=flag,
                KCACHE_LOCAL_DIR=str(w / f"node-{path}-warm-{i}")))
    for k, runs in rounds.items():
        c[k] = median_of(runs)
    eager = c["eager"]["to_first_step_s"]
    for cell in c.values():
        cell["overhead_s"] = round(cell["to_first_step_s"] - eager, 3)
    for k, paired in paired_overheads(rounds).items():
        c[k].update(paired)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"model": model, "layers": layers, "cells": c, "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M")}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--configs", help="comma-separated model-layers, e.g. gpt2-12,llama-24")
    p.add_argument("--merge", action="store_true",
                   help="keep the other configurations already in results.json")
    p.add_argument("--report", action="store_true", help="only regenerate REPORT.md and the plot")
    p.add_argument("--repeats", type=int, default=REPEATS, help="runs of each compared warm cell")
    p.add_argument("--out", type=Path, default=HERE / "results.json",
                   help="results file; REPORT.md is made only from the default one")
    args = p.parse_args()
    out = args.out.resolve()
    if not args.report:
        configs = [("gpt2", 12)] if args.quick else [("gpt2", 12), ("llama", 12), ("gpt2", 24),
                                                      ("llama", 24)]
        if args.configs:
            configs = [(c.split("-")[0], int(c.split("-")[1])) for c in args.configs.split(",")]
        work = Path(tempfile.mkdtemp(prefix="kcache-bench-warmstart-"))
        import importlib.metadata as md

        result = {"machine": {"host": platform.node(), "cpus": os.cpu_count(),
                              "python": platform.python_version(), **cpu_facts()},
                  "versions": {k: md.version(k) for k in ("torch", "transformers", "accelerate")},
                  "repeats": args.repeats,
                  "steps": STEPS, "hidden": HIDDEN, "command": "bench/warmstart/run.py"
                  + (" --quick" if args.quick else "")
                  + (f" --configs {args.configs}" if args.configs else "")
                  + (f" --repeats {args.repeats}" if args.repeats != REPEATS else "")
                  + (f" --out {out.relative_to(REPO)}" if out != HERE / "results.json" else ""), "rows": []}
        if args.merge and out.exists():
            old = json.loads(out.read_text())
            result["rows"] = [r for r in old["rows"] if (r["model"], r["layers"]) not in configs]
            result["command"] = old["command"] + " ; " + result["command"] + " --merge"
        try:
            for m, n in configs:  # results.json after each configuration
                # Fresh services per configuration: a 24-block model's blocks
                # have the 12-block model's region keys, so a shared server
                # would make its "cold" cells warm.
                (work / f"services-{m}-{n}").mkdir()
                _redis, port = services.start_redis(work / f"services-{m}-{n}")
                _server, url = services.start_server(
                    work / f"services-{m}-{n}", f"disk:{work / f'services-{m}-{n}' / 'kcache-data'}")
                result["rows"].append(configuration(work, m, n, port, url, args.repeats))
                out.write_text(json.dumps(result, indent=1) + "\n")
                services.stop_all()
        finally:
            services.stop_all()
            # Gigabytes per configuration (Inductor dirs, node tiers, stores):
            # left behind, a few runs filled this machine's disk.
            shutil.rmtree(work, ignore_errors=True)
        if out != HERE / "results.json":
            return
    import report

    report.write(HERE)


if __name__ == "__main__":
    main()
