"""REPORT.md and plot.png from bench/coldstart/results.json.

    .venv/bin/python bench/coldstart/report.py    # rewrites them from results.json
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


def _by(results: list[dict]) -> dict[tuple[str, int], dict]:
    return {(r["setup"], r["n"]): r for r in results}


def _cell(wave: dict, fmt) -> str:
    return "failed" if not wave or "error" in wave else fmt(wave)


def summary_table(results: list[dict]) -> list[str]:
    lines = ["| N | setup | wave | all ranks ready (s) | first all-reduce (s) | g++ codegen / all runs | "
             "g++ CPU (s) | ranks' CPU (s) | server requests | server bytes sent | lease waits |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for wave in ("cold", "restart"):
            w = r.get(wave, {})
            if not w and wave == "restart" and r["setup"] == "none":
                continue  # not run: equal to the cold wave by construction
            if not w or "error" in w:
                lines.append(f"| {r['n']} | {r['setup']} | {wave} | {(w or {}).get('error', 'missing')[:80]} |"
                             + " |" * 8)
                continue
            srv = w.get("server", {})
            waits = sum(k["kcache"].get("client", {}).get("lease_waits", 0) for k in w["ranks"])
            lines.append(
                f"| {r['n']} | {r['setup']} | {wave} | {w['all_ready_s']:.1f} | {w['all_first_allreduce_s']:.1f} | "
                f"{w['cxx_codegen']} / {w['cxx_runs']} | {w['cxx_cpu_s']:.1f} | {w['rank_cpu_s']:.0f} | "
                f"{int(srv['kcache_http_requests_total']) if srv else '-'} | "
                f"{int(srv['kcache_sent_bytes_total']) if srv else '-'} | {waits if r['setup'] not in PLAIN_SETUPS else '-'} |")
    return lines


def target_checks(results: list[dict]) -> list[str]:
    by = _by(results)
    ns = sorted({r["n"] for r in results})
    lines = ["| setup | codegen runs N=max ÷ N=1 | g++ CPU N=max ÷ N=1 (target ≤ 1.2) | "
             + " | ".join(f"all ready N={n} ÷ N=1" for n in ns if n > 1)
             + " | restart wave codegen runs (target 0) |",
             "|---|---:|---:|" + "---:|" * (len([n for n in ns if n > 1]) + 1)]
    top = max(ns)
    for setup in PLAIN_SETUPS + KCACHE_SETUPS:
        one, big = by.get((setup, 1), {}).get("cold"), by.get((setup, top), {}).get("cold")
        if not one or not big or "error" in one or "error" in big:
            continue
        ratios = []
        for n in ns:
            if n == 1:
                continue
            w = by.get((setup, n), {}).get("cold")
            ratios.append(_cell(w, lambda w: f"{w['all_ready_s'] / one['all_ready_s']:.2f}"))
        restarts = [by[(setup, n)].get("restart") for n in ns if (setup, n) in by]
        restart_runs = ("as cold (not run)" if setup == "none" and not any(restarts) else
                        "/".join(_cell(w, lambda w: str(w["cxx_codegen"])) for w in restarts))
        lines.append(f"| {setup} | {big['cxx_codegen']} ÷ {one['cxx_codegen']} | "
                     f"{big['cxx_cpu_s'] / max(one['cxx_cpu_s'], 1e-9):.2f} | " + " | ".join(ratios)
                     + f" | {restart_runs} |")
    return lines


def headline(results: list[dict]) -> list[str]:
    """At the largest N: kcache's setups against no kcache."""
    by = _by(results)
    top = max(r["n"] for r in results)
    # The reference: no kcache; in a run without that setup, PyTorch's own
    # remote caches (on CPU every rank compiles there too).
    ref = "none" if ("none", top) in by else "pytorch-remote"
    none = by.get((ref, top), {}).get("cold")
    if not none or "error" in none:
        return []
    lines = [f"At N={top}, without kcache ({ref}) every rank compiles: {none['all_ready_s']:.0f} s until "
             f"all regions are ready, {none['cxx_codegen']} host-compiler builds, "
             f"{none['cxx_cpu_s']:.0f} CPU-s of g++."]
    again = by.get((ref, top), {}).get("restart")
    if again and "error" not in again:
        lines[0] += (f" Its restart wave (new containers): {again['all_ready_s']:.0f} s, "
                     f"{again['cxx_codegen']} builds.")
    for setup in ("pytorch-remote",) + KCACHE_SETUPS:
        if setup == ref:
            continue
        r = by.get((setup, top), {})
        cold, restart = r.get("cold"), r.get("restart")
        if not cold or "error" in cold:
            continue
        text = (f"- **{setup}**: {cold['all_ready_s']:.0f} s ({none['all_ready_s'] / cold['all_ready_s']:.1f}x sooner), "
                f"{cold['cxx_codegen']} builds, {cold['cxx_cpu_s']:.0f} CPU-s of g++ "
                f"({none['cxx_cpu_s'] / max(cold['cxx_cpu_s'], 1e-9):.0f}x less)")
        if restart and "error" not in restart:
            text += (f"; restart wave {restart['all_ready_s']:.0f} s with {restart['cxx_codegen']} builds "
                     f"({restart['cxx_cpu_s']:.1f} CPU-s of g++ for Inductor's header preprocessing and "
                     f"kcache's `-march=native` query)")
        lines.append(text + ".")
    return lines


def losses_check(results: list[dict]) -> list[str]:
    """Every rank's losses, compared across setups and waves at the same N."""
    lines = []
    for n in sorted({r["n"] for r in results}):
        runs = [(r["setup"], wave, r[wave]) for r in results if r["n"] == n for wave in ("cold", "restart")
                if r.get(wave) and "error" not in r[wave]]
        if not runs:
            continue
        ref_name, ref = f"{runs[0][0]} {runs[0][1]}", runs[0][2]
        differing = [f"{s} {w}" for s, w, res in runs[1:]
                     if [k["losses"] for k in res["ranks"]] != [k["losses"] for k in ref["ranks"]]]
        verdict = "bit-identical" if not differing else "DIFFER: " + ", ".join(differing)
        lines.append(f"- N={n}: {len(runs)} runs × {n} ranks, every step's loss against {ref_name}: {verdict}")
    return lines


def per_rank(results: list[dict]) -> list[str]:
    lines = ["| setup | N | wave | rank | regions ready (s) | first all-reduce (s) | g++ codegen / runs | "
             "g++ CPU (s) | PyTorch FX-graph cache hit / miss | kcache node / server hits, misses, compiles | "
             "bytes fetched | lease waits |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in results:
        for wave in ("cold", "restart"):
            w = r.get(wave, {})
            for k in (w or {}).get("ranks", []):
                ind = k["counters"].get("inductor", {})
                kc = k["kcache"]
                cl = kc.get("client", {})
                lines.append(
                    f"| {r['setup']} | {r['n']} | {wave} | {k['rank']} | {k['regions_ready_s']:.1f} | "
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
    for setup in PLAIN_SETUPS + KCACHE_SETUPS:
        for wave, style in (("cold", "-o"), ("restart", "--x")):
            pts = [(r["n"], r[wave]) for r in results if r["setup"] == setup
                   and r.get(wave) and "error" not in r[wave]]
            if not pts:
                continue
            ns = [n for n, _ in pts]
            a.plot(ns, [w["all_ready_s"] for _, w in pts], style, label=f"{setup} {wave}")
            b.plot(ns, [w["cxx_cpu_s"] for _, w in pts], style, label=f"{setup} {wave}")
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
    text = [
        "# Cluster cold start: N data-parallel ranks, four setups",
        "",
        f"Generated by `bench/coldstart/run.py` on {meta['date']} ({meta['machine']}, {meta['cpus']} CPUs, "
        f"torch {meta['torch']}); the whole run took {meta['elapsed_s']} s. Job: `examples/ddp_train.py`, "
        f"{meta['model']} with {meta['layers']} blocks of width {meta['hidden']}, {meta['steps']} AdamW steps, "
        "torchrun with gloo on loopback, gradients averaged by an all-reduce every step. "
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
        "## Per setup and N",
        "",
        *summary_table(results),
        "",
        "![time to regions-ready and host-compiler work](plot.png)",
        "",
        "<details><summary>Per rank</summary>",
        "",
        *per_rank(results),
        "",
        "</details>",
        "",
    ]
    report_path.write_text("\n".join(text))


if __name__ == "__main__":
    res = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results.json"
    write(res, HERE / "REPORT.md", HERE / "plot.png")
