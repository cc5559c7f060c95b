"""REPORT_background.md and plot_background.png from
bench/coldstart/results_background.json: issue 51's cold start without
waiting (KCACHE_COLD_START=background, kcache's default with a server)
beside today's wait (setup "precompiled", KCACHE_COLD_START=wait) and an
eager job (no compile at all), DDP or FSDP2 (results' meta "job") on this
machine.

    .venv/bin/python bench/coldstart/report_background.py [results_background.json]
    # results_background_X.json -> REPORT_background_X.md and plot_background_X.png

Every figure and verdict below is computed from the results file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETUPS = ("eager", "precompiled", "background")
LABEL = {"eager": "eager (no compile)", "precompiled": "kcache, wait", "background": "kcache, background"}
JOB = {"ddp": "`examples/ddp_train.py` (DDP)",
       "fsdp2": "`examples/accelerate_fsdp2.py` (Accelerate's FSDP2, fully_shard per block, kcache through "
                "`kcache.accelerate.install()`; the eager job is `bench/coldstart/fsdp2_eager.py`, the same "
                "Accelerator without compile_regions; FSDP2 reduces gradients inside backward, so its "
                "\"first all-reduce\" is the end of the first backward)"}


def rows(data: dict) -> dict[tuple[str, int], dict]:
    return {(r["setup"], r["n"]): r for r in data["results"]}


def loss_gap(run: dict, eager: dict) -> tuple[float, int]:
    """Largest |loss - eager's| over every rank and every step both ran."""
    gap, steps = 0.0, 0
    by_rank = {r["rank"]: r["losses"] for r in eager["ranks"]}
    for r in run["ranks"]:
        ref = by_rank.get(r["rank"], [])
        for a, b in zip(r["losses"], ref):
            gap = max(gap, abs(a - b))
        steps = max(steps, min(len(r["losses"]), len(ref)))
    return gap, steps


def mixing(run: dict, eager: dict) -> tuple[int | None, int | None, int | None]:
    """(the first step at which some region of some rank had switched, the
    first step whose loss differs from eager's at all, the first by more
    than 1e-4), over the ranks: before the first switch every block ran
    eagerly."""
    first_switch, first_diff, first_over = None, None, None
    by_rank = {r["rank"]: r["losses"] for r in eager["ranks"]}
    for r in run["ranks"]:
        t0, ends = r.get("timeline_t0_s"), r.get("step_end_s", [])
        switched = [t0 + j["switched_s"] for j in r.get("timeline", [])
                    if t0 is not None and j.get("switched_s") is not None]
        if switched and ends:
            step = next((i for i, t in enumerate(ends) if t >= min(switched)), len(ends))
            first_switch = step if first_switch is None else min(first_switch, step)
        pairs = list(zip(r["losses"], by_rank.get(r["rank"], [])))
        diff = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
        if diff is not None:
            first_diff = diff if first_diff is None else min(first_diff, diff)
        over = next((i for i, (a, b) in enumerate(pairs) if abs(a - b) > 1e-4), None)
        if over is not None:
            first_over = over if first_over is None else min(first_over, over)
    return first_switch, first_diff, first_over


def drift_verdict(wait_over: int | None, bg_over: int | None) -> str:
    """What the fully compiled job's drift says about the mixed phase's."""
    if bg_over is None:
        return "**the background job stays within 1e-4**"
    if wait_over is None:
        return "**a fully compiled job stays within 1e-4 over as long: the drift is the mixing's**"
    if wait_over <= bg_over:
        return ("**a fully compiled job drifts past 1e-4 as soon or sooner: the drift is compiled against "
                "eager float order carried on by AdamW, not the mixing**")
    return (f"**a fully compiled job drifts past 1e-4 too, {wait_over - bg_over} steps later than the "
            "mixed one**")


def spread(run: dict) -> dict | None:
    """Cluster compile wall time (first hand-over to last landing, all
    ranks on one clock) against the sum of the regions' compile seconds
    (each region counted once: by the worker that compiled it)."""
    jobs = []
    for r in run["ranks"]:
        t0 = r.get("timeline_t0_s")
        for j in r.get("timeline", []):
            if t0 is not None and j.get("landed_s") is not None:
                jobs.append((t0 + j["submitted_s"], t0 + j["landed_s"], j))
    compiled = {j["key"]: j["compile_seconds"] for _, _, j in jobs if j["by"] == "this rank's worker"}
    if not jobs or not compiled:
        return None
    wall = max(end for _, end, _ in jobs) - min(start for start, _, _ in jobs)
    return {"regions": len(compiled), "sum_s": sum(compiled.values()), "wall_s": wall,
            "workers": len({r["rank"] for r in run["ranks"]
                            for j in r.get("timeline", []) if j["by"] == "this rank's worker"})}


def shared_kernels(log: Path) -> str:
    """The outputs that more than one rank built, in a kept compiler log."""
    if not log.exists():
        return "(log missing)"
    by: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        rank, _, _, out = line.split()
        if out.endswith((".so", ".o")):
            by.setdefault(out, set()).add(rank)
    twice = sorted(o for o, ranks in by.items() if len(ranks) > 1)
    total = sum(1 for line in log.read_text().splitlines() if line.split()[3].endswith((".so", ".o")))
    return (f"{total} builds, {len(twice)} of them of a file another rank's worker built too"
            + (f" ({', '.join(twice)})" if twice else ""))


def kernels(wave: dict) -> dict | None:
    """Kernel libraries the ranks' workers built, installed from another's
    build and refused, summed; None for a run before they were shared."""
    ks = [r["kcache"] for r in wave["ranks"] if r.get("kcache")]
    if not ks or not any("background_kernels_built" in k for k in ks):
        return None
    return {w: sum(k.get(f"background_kernels_{w}", 0) for k in ks) for w in ("built", "fetched", "refused")}


def eager_calls(wave: dict) -> int:
    return sum(r["kcache"].get("eager_block_calls", 0) for r in wave["ranks"] if r.get("kcache"))


def jobs_of(wave: dict) -> int:
    return sum(r["kcache"].get("background_jobs", 0) for r in wave["ranks"] if r.get("kcache"))


def write(path: Path, md: Path, png: Path) -> None:
    data = json.loads(path.read_text())
    meta, by = data["meta"], rows(data)
    ns = sorted({n for _, n in by})
    lines = [
        "# Cold start without waiting: eager, kcache waiting, kcache in the background",
        "",
        f"Generated by `bench/coldstart/report_background.py` from `{path.name}`, written by "
        f"`{meta['command']}` on {meta['date']} ({meta['machine']}, {meta['cpus']} CPUs, torch {meta['torch']}; "
        f"the run took {meta['elapsed_s']} s). Job: {JOB[meta.get('job', 'ddp')]}, {meta['model']} with "
        f"{meta['layers']} blocks of width {meta['hidden']}, over gloo on loopback, all N ranks on this "
        "machine's CPUs. Setups: **eager** — no compile; **kcache, wait** — `KCACHE_COLD_START=wait`, the "
        "rank that leases a region compiles it in its first forward and the others wait (kcache before "
        "issue 51); **kcache, background** — the default with a server: blocks run eagerly while each "
        "rank's compile worker builds regions, the background job steps on until every rank runs compiled "
        "(`--until-compiled`), and the eager job runs as many steps. Each kcache setup: a cold wave (fresh "
        "server) and a restart wave (same server, fresh node and Inductor directories).",
        "",
        "## Per N",
        "",
        "| N | setup | wave | first all-reduce (s) | ÷ eager | all ranks compiled (s) | g++ codegen runs | "
        "eager block calls | regions handed to workers |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    verdicts = []
    for n in ns:
        eager = by.get(("eager", n), {}).get("cold")
        for setup in SETUPS:
            row = by.get((setup, n))
            if not row:
                continue
            for wave in ("cold", "restart"):
                w = row.get(wave)
                if not w:
                    continue
                if "error" in w:
                    lines.append(f"| {n} | {LABEL[setup]} | {wave} | error: {w['error'][:80]} | | | | | |")
                    continue
                ratio = (f"{w['all_first_allreduce_s'] / eager['all_first_allreduce_s']:.2f}"
                         if eager and "error" not in eager else "-")
                compiled = "-" if setup == "eager" else f"{w['all_compiled_s']:.1f}"
                lines.append(f"| {n} | {LABEL[setup]} | {wave} | {w['all_first_allreduce_s']:.1f} | {ratio} | "
                             f"{compiled} | {w['cxx_codegen']} | {eager_calls(w)} | {jobs_of(w)} |")
    lines += ["", "## Verdicts", ""]
    one = by.get(("background", ns[0]), {}).get("cold") if ns else None
    for n in ns:
        bg, eager = by.get(("background", n), {}), by.get(("eager", n), {}).get("cold")
        cold, restart = bg.get("cold"), bg.get("restart")
        if not cold or "error" in cold or not eager or "error" in eager:
            verdicts.append(f"- N={n}: not measured (a wave failed or is missing)")
            continue
        r = cold["all_first_allreduce_s"] / eager["all_first_allreduce_s"]
        verdicts.append(f"- N={n}, time to the first all-reduce within 1.5x of eager's: "
                        f"{cold['all_first_allreduce_s']:.1f} s vs {eager['all_first_allreduce_s']:.1f} s "
                        f"({r:.2f}x) — **{'met' if r <= 1.5 else 'not met'}**")
        verdicts.append(f"- N={n}, every rank on compiled regions at {cold['all_compiled_s']:.1f} s "
                        f"(waiting: first all-reduce at "
                        + (f"{by[('precompiled', n)]['cold']['all_first_allreduce_s']:.1f} s)"
                           if ("precompiled", n) in by and "error" not in by[("precompiled", n)]["cold"] else "-)"))
        if one is not None and "error" not in one:
            same = cold["cxx_codegen"] == one["cxx_codegen"]
            verdicts.append(f"- N={n}, host-compiler builds cluster-wide {cold['cxx_codegen']} against "
                            f"{one['cxx_codegen']} at N={ns[0]} — **{'met' if same else 'not met'}**")
        shared = kernels(cold)
        if shared is not None:
            verdicts.append(f"- N={n}, kernel libraries: {shared['built']} built by the ranks' workers, "
                            f"{shared['fetched']} installed from another worker's build, {shared['refused']} "
                            "refused (kcache/background/shared_kernels.py)")
        gap, steps = loss_gap(cold, eager)
        switch, diff, over = mixing(cold, eager)
        where = ""
        if switch is not None:
            where = (f"; identical to eager's bit for bit through step {(diff if diff is not None else steps) - 1} "
                     f"(the first region switched in step {switch})")
        drift = (f"; the first step off by more than 1e-4 is step {over}, "
                 f"{over - switch if switch is not None else '?'} steps into the mixed phase" if over is not None else "")
        verdicts.append(f"- N={n}, loss at every step (all ranks, {steps} steps) within 1e-4 of eager's: "
                        f"largest gap {gap:.2e} — **{'met' if gap <= 1e-4 else 'not met'}**{where}{drift} "
                        "(not bit-identical while eager and compiled blocks mix: each block's float order "
                        "changes when it switches, and AdamW's normalized updates carry a difference on)")
        wait = by.get(("precompiled", n), {}).get("cold")
        if wait and "error" not in wait and min(len(r["losses"]) for r in wait["ranks"]) >= steps > 3:
            # The reference for the mixed phase's drift: every block
            # compiled from the first step, over as many steps.
            wgap, wsteps = loss_gap(wait, eager)
            _, wdiff, wover = mixing(wait, eager)
            verdicts.append(
                f"- N={n}, the same job fully compiled from its first step (kcache, wait; "
                f"`--wait-steps-as-background`), {wsteps} steps: largest gap to eager's {wgap:.2e}, "
                + (f"first differing at step {wdiff}, " if wdiff is not None else "never differing, ")
                + (f"first off by more than 1e-4 at step {wover}" if wover is not None else "never off by more than 1e-4")
                + f" (the background job's: {'step ' + str(over) if over is not None else 'never'}) — "
                + drift_verdict(wover, over))
        if restart and "error" not in restart:
            ok = eager_calls(restart) == 0 and jobs_of(restart) == 0 and restart["cxx_codegen"] == 0
            verdicts.append(f"- N={n}, restart wave: {eager_calls(restart)} eager block calls, "
                            f"{jobs_of(restart)} regions handed over, {restart['cxx_codegen']} builds — "
                            f"**{'unchanged (met)' if ok else 'not met'}**")
        s = spread(cold)
        if s and n >= 2:
            verdicts.append(f"- N={n}, {s['regions']} regions compiled by {s['workers']} ranks' workers: "
                            f"cluster compile wall time {s['wall_s']:.1f} s against {s['sum_s']:.1f} s summed — "
                            f"**{'below the sum (met)' if s['wall_s'] < s['sum_s'] else 'not below the sum'}**")
    lines += verdicts
    sharing = any(kernels(w) is not None for row in by.values() for w in (row.get("cold"),) if w and "error" not in w)
    lines += ["", ("Builds: the compile workers of this run built each CPU kernel library through the store "
                   "(kcache/background/shared_kernels.py, docs/cold-start.md \"Kernels two regions share\"): a "
                   "kernel that two regions share, compiled by workers of different ranks, is built once and "
                   "installed by the other." if sharing else
                   "Builds: with regions spread over several workers, a kernel that two regions share "
                   "(Inductor generates the same C++ for both) is built once by each worker that compiles one "
                   "of them, where one process builds it once for both.")
              + " Before kernel libraries were shared, bench/coldstart/background_n2_cxx.log "
              "(`run.py --ranks 2 --setups background --keep`, one g++ run per line: rank, CPU seconds, "
              "output) showed it: " + shared_kernels(HERE / "background_n2_cxx.log") + ".",
              "", "All N ranks and their workers share this machine's 2 CPUs: a worker compiling beside "
              "eager ranks slows both, and regions compiled at once on different ranks still share two "
              "cores, so the wall time of parallel compiles falls below their sum only as far as two "
              "cores allow. On a GPU cluster each rank's worker has the host CPUs of its own node while "
              "the GPUs train eagerly: the compile wall time would approach the slowest region's.", "",
              f"![steps completed against wall-clock time]({png.name})", ""]
    md.write_text("\n".join(lines))
    plot(by, ns, png)


def plot(by: dict, ns: list[int], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ns), figsize=(5 * len(ns), 4), squeeze=False)
    for ax, n in zip(axes[0], ns):
        for setup in SETUPS:
            for wave in ("cold", "restart"):
                w = by.get((setup, n), {}).get(wave)
                if not w or "error" in w:
                    continue
                r0 = next(r for r in w["ranks"] if r["rank"] == 0)
                ts = r0.get("step_end_s", [])
                ax.plot(ts, range(1, len(ts) + 1), label=f"{LABEL[setup]} {wave}",
                        linestyle="-" if wave == "cold" else "--")
        ax.set_title(f"N = {n} (rank 0)")
        ax.set_xlabel("seconds since launch")
        ax.set_ylabel("steps completed")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def outputs_for(path: Path) -> tuple[Path, Path]:
    """results_background_X.json -> REPORT_background_X.md, plot_background_X.png."""
    stem = path.stem.replace("results", "", 1)
    return path.with_name(f"REPORT{stem}.md"), path.with_name(f"plot{stem}.png")


if __name__ == "__main__":
    p = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results_background.json"
    write(p, *outputs_for(p))
