"""REPORT.md and plot.png from bench/coldstart/results.json (or REPORT_X.md
and plot_X.png from results_X.json).

    .venv/bin/python bench/coldstart/report.py                       # from results.json
    .venv/bin/python bench/coldstart/report.py bench/coldstart/results_4layers.json

A results file may hold rows of two jobs (run.py --job): ddp
(examples/ddp_train.py, the rows without a "job" field) and fsdp2
(examples/accelerate_fsdp2.py); every table shows them side by side, and
each job's setups are judged against that job's own rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KCACHE_SETUPS = ("node", "server-disk", "server-redis", "precompiled")
# Setups without kcache, compared against: every rank compiles; or PyTorch's
# own remote caches on redis-server.
PLAIN_SETUPS = ("none", "pytorch-remote")


JOBS = ("ddp", "fsdp2")
JOB_SCRIPTS = {"ddp": "examples/ddp_train.py", "fsdp2": "examples/accelerate_fsdp2.py"}
SETUP_ORDER = PLAIN_SETUPS + KCACHE_SETUPS


def job(r: dict) -> str:
    return r.get("job", "ddp")  # rows written before --job existed are the DDP job's


def _sorted(results: list[dict]) -> list[dict]:
    return sorted(results, key=lambda r: (r["n"], JOBS.index(job(r)), SETUP_ORDER.index(r["setup"])))


def _by(results: list[dict]) -> dict[tuple[str, str, int], dict]:
    return {(job(r), r["setup"], r["n"]): r for r in results}


def _jobs(results: list[dict]) -> list[str]:
    return [j for j in JOBS if any(job(r) == j for r in results)]


def _misses(wave: dict) -> tuple[int, int]:
    """FX-graph and AOTAutograd cache misses, all ranks."""
    fx = sum(k["counters"].get("inductor", {}).get("fxgraph_cache_miss", 0) for k in wave["ranks"])
    aot = sum(k["counters"].get("aot_autograd", {}).get("autograd_cache_miss", 0) for k in wave["ranks"])
    return fx, aot


def _cell(wave: dict, fmt) -> str:
    return "failed" if not wave or "error" in wave else fmt(wave)


def summary_table(results: list[dict]) -> list[str]:
    lines = ["| N | job | setup | wave | all ranks ready (s) | first all-reduce (s) | g++ codegen / all runs | "
             "g++ CPU (s) | ranks' CPU (s) | server requests | server bytes sent | lease waits |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in _sorted(results):
        for wave in ("cold", "restart"):
            w = r.get(wave, {})
            if not w and wave == "restart" and r["setup"] == "none":
                continue  # not run: equal to the cold wave by construction
            if not w or "error" in w:
                lines.append(f"| {r['n']} | {job(r)} | {r['setup']} | {wave} | "
                             f"{(w or {}).get('error', 'missing')[:80]} |" + " |" * 8)
                continue
            srv = w.get("server", {})
            waits = sum(k["kcache"].get("client", {}).get("lease_waits", 0) for k in w["ranks"])
            lines.append(
                f"| {r['n']} | {job(r)} | {r['setup']} | {wave} | {w['all_ready_s']:.1f} | "
                f"{w['all_first_allreduce_s']:.1f} | "
                f"{w['cxx_codegen']} / {w['cxx_runs']} | {w['cxx_cpu_s']:.1f} | {w['rank_cpu_s']:.0f} | "
                f"{int(srv['kcache_http_requests_total']) if srv else '-'} | "
                f"{int(srv['kcache_sent_bytes_total']) if srv else '-'} | {waits if r['setup'] not in PLAIN_SETUPS else '-'} |")
    return lines


def target_checks(results: list[dict]) -> list[str]:
    """Per job and setup: how kernel builds and g++ CPU grow with N, and the
    verdict for kcache's setups, from counters only (CPU and wall seconds
    are noisy on a shared 2-core machine; the g++ CPU ratio is shown against
    its target beside it): every kernel built once cluster-wide (the codegen
    runs at every N equal N=1's), and restart waves with no kernel build and
    no FX-graph or AOTAutograd miss. The setups without kcache are the
    references."""
    by = _by(results)
    ns = sorted({r["n"] for r in results})
    lines = ["| job | setup | codegen runs N=max ÷ N=1 | g++ CPU N=max ÷ N=1 (target ≤ 1.2) | "
             + " | ".join(f"all ready N={n} ÷ N=1" for n in ns if n > 1)
             + " | restart wave codegen runs (target 0) | restart FX-graph/AOTAutograd misses per N (target 0/0) "
             "| verdict (counters) |",
             "|---|---|---:|---:|" + "---:|" * (len([n for n in ns if n > 1]) + 2) + "---|"]
    for j in _jobs(results):
        jns = sorted({r["n"] for r in results if job(r) == j})
        top = max(jns)
        for setup in SETUP_ORDER:
            one, big = by.get((j, setup, 1), {}).get("cold"), by.get((j, setup, top), {}).get("cold")
            if not one or not big or "error" in one or "error" in big:
                continue
            ratios = []
            for n in ns:
                if n == 1:
                    continue
                w = by.get((j, setup, n), {}).get("cold")
                ratios.append(_cell(w, lambda w: f"{w['all_ready_s'] / one['all_ready_s']:.2f}") if w else "-")
            colds = [by[(j, setup, n)].get("cold") for n in jns if (j, setup, n) in by]
            restarts = [by[(j, setup, n)].get("restart") for n in jns if (j, setup, n) in by]
            not_run = setup == "none" and not any(restarts)
            restart_runs = ("as cold (not run)" if not_run else
                            "/".join(_cell(w, lambda w: str(w["cxx_codegen"])) for w in restarts))
            restart_misses = ("-" if not_run else
                              " · ".join(_cell(w, lambda w: "%d/%d" % _misses(w)) for w in restarts))
            cpu_ratio = big["cxx_cpu_s"] / max(one["cxx_cpu_s"], 1e-9)
            if setup in PLAIN_SETUPS:
                verdict = "reference (every rank compiles)"
            else:
                failed = []
                if any(not w or "error" in w or w["cxx_codegen"] != one["cxx_codegen"] for w in colds):
                    failed.append("kernels built once cluster-wide")
                if any(not w or "error" in w or w["cxx_codegen"] != 0 for w in restarts):
                    failed.append("restart builds no kernel")
                if any(not w or "error" in w or _misses(w) != (0, 0) for w in restarts):
                    failed.append("restart has no FX-graph or AOTAutograd miss")
                verdict = "all met" if not failed else "**NOT MET: " + "; ".join(failed) + "**"
            lines.append(f"| {j} | {setup} | {big['cxx_codegen']} ÷ {one['cxx_codegen']} | "
                         f"{cpu_ratio:.2f} | " + " | ".join(ratios)
                         + f" | {restart_runs} | {restart_misses} | {verdict} |")
    return lines


def headline(results: list[dict]) -> list[str]:
    """At each job's largest N: kcache's setups against no kcache."""
    by = _by(results)
    lines = []
    for j in _jobs(results):
        top = max(r["n"] for r in results if job(r) == j)
        # The reference: no kcache; in a run without that setup, PyTorch's own
        # remote caches (on CPU every rank compiles there too).
        ref = "none" if (j, "none", top) in by else "pytorch-remote"
        none = by.get((j, ref, top), {}).get("cold")
        if not none or "error" in none:
            continue
        lines.append(f"{j.upper()} ({JOB_SCRIPTS[j]}) at N={top}, without kcache ({ref}) every rank compiles: "
                     f"{none['all_ready_s']:.0f} s until all regions are ready, {none['cxx_codegen']} "
                     f"host-compiler builds, {none['cxx_cpu_s']:.0f} CPU-s of g++.")
        again = by.get((j, ref, top), {}).get("restart")
        if again and "error" not in again:
            lines[-1] += (f" Its restart wave (new containers): {again['all_ready_s']:.0f} s, "
                          f"{again['cxx_codegen']} builds.")
        for setup in ("pytorch-remote",) + KCACHE_SETUPS:
            if setup == ref:
                continue
            r = by.get((j, setup, top), {})
            cold, restart = r.get("cold"), r.get("restart")
            if not cold or "error" in cold:
                continue
            text = (f"- **{setup}**: {cold['all_ready_s']:.0f} s ({none['all_ready_s'] / cold['all_ready_s']:.1f}x "
                    f"sooner), {cold['cxx_codegen']} builds, {cold['cxx_cpu_s']:.0f} CPU-s of g++ "
                    f"({none['cxx_cpu_s'] / max(cold['cxx_cpu_s'], 1e-9):.0f}x less)")
            if restart and "error" not in restart:
                text += (f"; restart wave {restart['all_ready_s']:.0f} s with {restart['cxx_codegen']} builds "
                         f"({restart['cxx_cpu_s']:.1f} CPU-s of g++ for Inductor's header preprocessing and "
                         f"kcache's `-march=native` query)")
            lines.append(text + ".")
        lines.append("")
    return lines


def losses_check(results: list[dict]) -> list[str]:
    """Every rank's losses, compared across setups and waves at the same N."""
    lines = []
    for j in _jobs(results):
        for n in sorted({r["n"] for r in results if job(r) == j}):
            runs = [(r["setup"], wave, r[wave]) for r in _sorted(results) if r["n"] == n and job(r) == j
                    for wave in ("cold", "restart") if r.get(wave) and "error" not in r[wave]]
            if not runs:
                continue
            ref_name, ref = f"{runs[0][0]} {runs[0][1]}", runs[0][2]
            differing = [f"{s} {w}" for s, w, res in runs[1:]
                         if [k["losses"] for k in res["ranks"]] != [k["losses"] for k in ref["ranks"]]]
            verdict = "bit-identical" if not differing else "DIFFER: " + ", ".join(differing)
            lines.append(f"- {j}, N={n}: {len(runs)} runs × {n} ranks, every step's loss against "
                         f"{ref_name}: {verdict}")
    return lines


def per_rank(results: list[dict]) -> list[str]:
    lines = ["| job | setup | N | wave | rank | regions ready (s) | first all-reduce (s) | g++ codegen / runs | "
             "g++ CPU (s) | PyTorch FX-graph cache hit / miss | kcache node / server hits, misses, compiles | "
             "bytes fetched | lease waits |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in _sorted(results):
        for wave in ("cold", "restart"):
            w = r.get(wave, {})
            for k in (w or {}).get("ranks", []):
                ind = k["counters"].get("inductor", {})
                kc = k["kcache"]
                cl = kc.get("client", {})
                lines.append(
                    f"| {job(r)} | {r['setup']} | {r['n']} | {wave} | {k['rank']} | {k['regions_ready_s']:.1f} | "
                    f"{k['first_allreduce_s']:.1f} | {k['cxx_codegen']} / {k['cxx_runs']} | {k['cxx_cpu_s']:.1f} | "
                    f"{ind.get('fxgraph_cache_hit', 0)} / {ind.get('fxgraph_cache_miss', 0)} | "
                    + (f"{kc['hits_node']} / {kc['hits_server']}, {kc['misses']}, {kc['compiles']} | "
                       f"{kc['bytes_fetched']} | {cl.get('lease_waits', 0)} |" if kc else "- | - | - |"))
    return lines


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for j in _jobs(results):
        for setup in PLAIN_SETUPS + KCACHE_SETUPS:
            for wave, style in (("cold", "-o" if j == "ddp" else "-s"), ("restart", "--x" if j == "ddp" else ":+")):
                pts = sorted(((r["n"], r[wave]) for r in results if r["setup"] == setup and job(r) == j
                              and r.get(wave) and "error" not in r[wave]), key=lambda p: p[0])
                if not pts:
                    continue
                ns = [n for n, _ in pts]
                label = f"{setup} {wave}" if _jobs(results) == ["ddp"] else f"{j} {setup} {wave}"
                a.plot(ns, [w["all_ready_s"] for _, w in pts], style, label=label)
                b.plot(ns, [w["cxx_cpu_s"] for _, w in pts], style, label=label)
    a.set(xlabel="ranks (N)", ylabel="seconds until every rank's regions are ready",
          title="Time to regions-ready (2 CPUs shared by all ranks)")
    b.set(xlabel="ranks (N)", ylabel="host-compiler CPU seconds, all ranks",
          title="Host-compiler work")
    for ax in (a, b):
        ax.grid(alpha=0.3)
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write(results_path: Path, report_path: Path, plot_path: Path) -> None:
    data = json.loads(results_path.read_text())
    meta, results = data["meta"], data["results"]
    plot(results, plot_path)
    jobs = _jobs(results)
    merged = "".join(
        f" Rows merged from a later run: `{m.get('command', 'bench/coldstart/run.py')}` on {m['date']} "
        f"({m.get('job', 'ddp')} job, {m['layers']} blocks, {m['elapsed_s']} s"
        + (f"; {m['note']}" if m.get("note") else "") + ")." for m in meta.get("merged", []))
    if meta.get("note"):
        merged = f" Note: {meta['note']}." + merged
    fsdp2 = ("" if "fsdp2" not in jobs else
             " The **fsdp2** job is `examples/accelerate_fsdp2.py`: the same model through Accelerate's FSDP2 "
             "path (`fully_shard` on every block and the root, gloo), regions compiled by "
             "`kcache.accelerate.install()` (or by Accelerate's own `compile_regions` for the setups "
             "without kcache); FSDP2 reduce-scatters gradients inside backward, so its first all-reduce is "
             "the end of the first backward; its model runs without the KV cache (accelerate_job.py's "
             "default), and under FSDP2 the blocks take kcache's traced path (docs/distributed.md). "
             "Each job's rows are judged against that job's own rows.")
    text = [
        "# Cluster cold start: N data-parallel ranks, " + " and ".join(j.upper() for j in jobs),
        "",
        f"Generated by `bench/coldstart/run.py` on {meta['date']} ({meta['machine']}, {meta['cpus']} CPUs, "
        f"torch {meta['torch']}); the whole run took {meta['elapsed_s']} s.{merged} Jobs: **ddp** — "
        f"`examples/ddp_train.py`, {meta['model']} with {meta['layers']} blocks of width {meta['hidden']}, "
        f"{meta['steps']} AdamW steps, torchrun with gloo on loopback, gradients averaged by an all-reduce "
        f"every step.{fsdp2} "
        "TORCHINDUCTOR_COMPILE_THREADS=1 and OMP_NUM_THREADS=1. Every rank has an empty Inductor cache "
        "directory of its own (ranks on separate machines); host-compiler runs are counted by "
        "`cxx_counter.sh`, installed as Inductor's CXX.",
        "",
        "Setups: **none** — Accelerate's `compile_regions`, no kcache: every rank compiles. **node** — "
        "kcache's node tier only, one directory shared by all ranks (one machine). **server-disk** / "
        "**server-redis** — kcache-server on its disk storage / on redis-server, and each rank with a node "
        "directory of its own (one rank per machine: the server is the only thing they share); these three "
        "take kcache's traced path (KCACHE_PRECOMPILED=0). **precompiled** — server-disk with precompiled "
        "regions (docs/precompiled.md), kcache's default. **pytorch-remote** — no kcache; PyTorch's own "
        "FX-graph and AOTAutograd remote caches on a real redis-server (on CPU they carry no kernel "
        "binaries, so every rank still builds its kernels). "
        "**cold** wave: empty caches everywhere. **restart** wave: the same N ranks again with empty "
        "Inductor directories (new containers); the node setup keeps its node directory, the server setups "
        "start with empty node directories (ranks restarted on other machines).",
        "",
        "All N ranks share this machine's 2 CPUs, so wall times grow with N for every setup (each rank "
        "imports torch and traces with Dynamo even when it compiles nothing); compare setups at the same N. "
        "'g++ codegen' counts runs that wrote an object or shared library; 'all runs' adds Inductor's "
        "preprocessing of its C++ header in each fresh cache directory and kcache's one `-march=native` "
        "query per process.",
        "",
        "## Headline",
        "",
        *headline(results),
        "",
        "## Targets",
        "",
        *target_checks(results),
        "",
        "## Losses",
        "",
        *losses_check(results),
        "",
        "## Per job, setup and N",
        "",
        *summary_table(results),
        "",
        f"![time to regions-ready and host-compiler work]({plot_path.name})",
        "",
        "<details><summary>Per rank</summary>",
        "",
        *per_rank(results),
        "",
        "</details>",
        "",
    ]
    report_path.write_text("\n".join(text))


def outputs_for(results_path: Path) -> tuple[Path, Path]:
    """results.json -> REPORT.md, plot.png; results_X.json -> REPORT_X.md, plot_X.png (beside it)."""
    suffix = results_path.stem[len("results"):] if results_path.stem.startswith("results") else ""
    return (results_path.with_name(f"REPORT{suffix}.md"), results_path.with_name(f"plot{suffix}.png"))


if __name__ == "__main__":
    res = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results.json"
    write(res, *outputs_for(res))
