"""The report and plot of bench/coldstart/gpu_node.py's results: steps
completed against wall-clock time for every setup, the times that matter,
peak memory of each phase and of the compile worker, and the verdicts.

    .venv/bin/python bench/coldstart/report_gpu_node.py [results_gpu_node.json]
    # results_X.json -> REPORT_X.md and plot_X.png beside it

Every figure and verdict is computed from the results file.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CURVES = {  # (setup, wave) -> label
    ("eager", "cold"): "eager (no compile)",
    ("precompiled", "cold"): "kcache, wait",
    ("background", "cold"): "kcache, background (worker at normal priority)",
    ("background-idle", "cold"): "kcache, background, worker at idle priority",
    ("default", "cold"): "kcache, default (KCACHE_COLD_START unset)",
    ("background", "restart"): "restart (warm server, fresh processes)",
}
MARKS = {"pinned": (30, 60, 120), "shared": (30, 60, 120, 300)}


def outputs_for(results: Path) -> tuple[Path, Path]:
    stem = results.stem.removeprefix("results_")
    return results.with_name(f"REPORT_{stem}.md"), results.with_name(f"plot_{stem}.png")


def curves(data: dict) -> dict[tuple[str, int], dict[tuple[str, str], dict]]:
    """(model, N) -> (setup, wave) -> wave result (rank 0's view; the ranks
    step together: an all-reduce every step)."""
    out: dict = {}
    for r in data["results"]:
        for wave in ("cold", "restart"):
            if wave in r and (r["setup"], wave) in CURVES:
                out.setdefault((r["model"], r["n"]), {})[(r["setup"], wave)] = r[wave]
    return out


def steps_by(res: dict, t: float) -> int | None:
    if "error" in res:
        return None
    ends = res["ranks"][0]["step_end_s"]
    if not ends or ends[-1] < t:  # the run ended before t: not measured there
        return None
    return sum(1 for e in ends if e <= t)


def phases(res: dict) -> dict:
    """First step, when every block of every rank ran compiled, step times
    and per-step peak RSS of the eager and the compiled steps (step 0 apart:
    in wait mode the compile runs inside it), the worker's peak RSS."""
    if "error" in res:
        return {"error": res["error"][:300]}
    ranks = res["ranks"]
    eager_job = ranks[0].get("compiler") == "eager"
    eager_sets = [set(range(len(r["losses"]))) if eager_job else set(r["eager_steps"]) for r in ranks]
    out = {"first_step_s": max(r["step_end_s"][0] for r in ranks),
           "compiled_from_s": None if eager_job else max(
               (r["step_end_s"][r["eager_steps"][-1]] if r["eager_steps"] else r["step_end_s"][0]) for r in ranks),
           "steps": len(ranks[0]["step_end_s"]), "eager_steps": max(len(r["eager_steps"]) for r in ranks)}
    for name, eager_phase in (("eager", True), ("compiled", False)):
        times, peaks = [], []
        for r, eager_set in zip(ranks, eager_sets):
            ends = r["step_end_s"]
            for i in range(1, len(ends)):
                if (i in eager_set) == eager_phase:
                    times.append(ends[i] - ends[i - 1])
                    if r["step_peak_rss_mb"][i] is not None:
                        peaks.append(r["step_peak_rss_mb"][i])
        out[f"{name}_step_ms"] = round(statistics.median(times) * 1000, 1) if times else None
        out[f"{name}_peak_rss_mb"] = max(peaks) if peaks else None
    out["first_step_peak_rss_mb"] = max(r["step_peak_rss_mb"][0] or 0 for r in ranks)
    # (getrusage's ru_maxrss is reset with VmHWM by each step's clear_refs)
    out["process_peak_rss_mb"] = max(x for r in ranks for x in r["step_peak_rss_mb"] if x is not None)
    worker = [j["worker_peak_rss_mb"] for r in ranks for j in r.get("timeline", []) if j.get("worker_peak_rss_mb")]
    out["worker_peak_rss_mb"] = round(max(worker), 1) if worker else None
    out["worker_jobs"] = max(r["kcache"].get("background_jobs", 0) for r in ranks) if ranks[0]["kcache"] else 0
    return out


def fmt(x, unit: str = "") -> str:
    if x is None:
        return "—"
    return f"{x:.1f}{unit}" if isinstance(x, float) else f"{x}{unit}"


def verdicts(layout: str, by: dict) -> list[str]:
    out = []
    for (model, n), c in sorted(by.items()):
        if layout == "pinned":
            bg, wait, eager = (c.get((s, "cold")) for s in ("background", "precompiled", "eager"))
            if not (bg and wait and eager):
                continue
            ok = True
            for t in MARKS["pinned"]:
                b, w, e = steps_by(bg, t), steps_by(wait, t), steps_by(eager, t)
                hold = None not in (b, w, e) and b >= max(w, e)
                ok &= hold
                out.append(f"- {model} N={n}, {t} s: background {fmt(b)} steps, eager {fmt(e)}, wait {fmt(w)}: "
                           f"{'**holds**' if hold else '**fails**'} (background ≥ max(eager, wait))")
            pb, pw = phases(bg), phases(wait)
            if "error" not in pb and "error" not in pw:
                ratio = pb["compiled_from_s"] / pw["first_step_s"]
                out.append(f"- {model} N={n}: background compiled from {pb['compiled_from_s']:.1f} s, wait's first "
                           f"step at {pw['first_step_s']:.1f} s: ratio {ratio:.2f} "
                           f"{'**holds**' if ratio <= 1.2 else '**fails**'} (≤ 1.2)")
        else:
            wait, idle, dflt = (c.get((s, "cold")) for s in ("precompiled", "background-idle", "default"))
            # The choice: among the setups that compiled every region within
            # the run (a worker starved of cycles stores nothing: the job stays
            # eager and its restarts are cold again), the one with more steps
            # by 300 s; the steps by 60 s are shown beside.
            candidates = {"wait": wait, "worker at normal priority": c.get(("background", "cold")),
                          "worker at idle priority": idle}
            rows = []
            for name, res in candidates.items():
                if res is None or "error" in res:
                    continue
                ph = phases(res)
                compiled = ph["worker_jobs"] == 0 or ph["eager_steps"] < ph["steps"]
                rows.append((name, steps_by(res, 60), steps_by(res, 300), compiled, ph))
                out.append(f"- {model} N={n}, {name}: {fmt(steps_by(res, 60))} steps by 60 s, "
                           f"{fmt(steps_by(res, 300))} by 300 s; "
                           + ("every block compiled from " + fmt(ph["compiled_from_s"], " s") if compiled else
                              "**never compiled** (its last step still ran a block eagerly: nothing stored for "
                              "the next start)"))
            eligible = [r for r in rows if r[3] and r[2] is not None]
            if eligible:
                from kcache.background import placement

                best = max(eligible, key=lambda r: r[2])
                measured = "wait" if best[0] == "wait" else "background"
                agree = measured == placement.SHARED_CORES_MODE
                out.append(f"- {model} N={n}: measured choice on shared cores (most steps by 300 s among the "
                           f"setups that compiled): **{best[0]}**; kcache's (kcache/background/placement.py "
                           f"SHARED_CORES_MODE): {placement.SHARED_CORES_MODE}: "
                           f"{'**agrees**' if agree else '**disagrees**'}")
                for name, _, at300, compiled, ph in rows:
                    if compiled or at300 is None or best[0] != "wait":
                        continue
                    # when the compiled job overtakes an eager-only one, from their measured step times
                    lead, gain = at300 - best[2], 1 / (best[4]["compiled_step_ms"] / 1000) - 1 / (ph["eager_step_ms"] / 1000)
                    if lead > 0 and gain > 0:
                        out.append(f"- {model} N={n}: the {name} job leads wait by {lead} steps at 300 s and loses "
                                   f"{gain:.1f} steps/s to it (step times {ph['eager_step_ms']} against "
                                   f"{best[4]['compiled_step_ms']} ms): wait is ahead from about "
                                   f"{300 + lead / gain:.0f} s on (a projection from the measured step times)")
            if wait and dflt:
                w, d = steps_by(wait, 60), steps_by(dflt, 60)
                waited = phases(dflt).get("worker_jobs") == 0
                if waited:  # the same mode in two runs: compared, the gap is run-to-run noise
                    out.append(f"- {model} N={n}: the default chose wait (no worker job); at 60 s it completed "
                               f"{fmt(d)} steps, the wait run {fmt(w)}: **holds** (the default is wait mode; "
                               "the gap is between two runs of it)")
                else:
                    hold = None not in (w, d) and d >= w
                    out.append(f"- {model} N={n}: the default chose a compile worker; at 60 s it completed "
                               f"{fmt(d)} steps, wait {fmt(w)}: {'**holds**' if hold else '**fails**'} "
                               "(default ≥ wait)")
    return out


def write(results: Path, report: Path | None = None, plot: Path | None = None) -> None:
    if report is None or plot is None:
        report, plot = outputs_for(results)
    data = json.loads(results.read_text())
    meta, layout = data["meta"], data["meta"]["layout"]
    by = curves(data)
    lines = [f"# Cold start, {'a GPU node simulated' if layout == 'pinned' else 'shared cores (the README demo)'}",
             "", f"Generated by `bench/coldstart/report_gpu_node.py` from `{results.name}`, made by "
             f"`{meta['command']}` on {meta['date']} ({meta['cpus']} CPUs, torch {meta['torch']}, load average "
             f"{meta['load_average_before']} when the results were written, {meta['elapsed_s']} s in all).", ""]
    if layout == "pinned":
        lines += [f"Layout: torchrun and its ranks pinned to CPU {meta['training_cpus']} (one intra-op thread "
                  f"each), each rank's compile worker to CPU {meta['worker_cpus']} (KCACHE_WORKER_CPUS): the "
                  "compile never takes the training's core, as on a GPU node whose host cores are idle. With "
                  "N = 2 both ranks share CPU 0 (this machine has two), which slows every setup alike. "
                  f"Models: {', '.join(meta['models'])}, {meta['layers']} blocks, hidden {meta['hidden']}, batch "
                  f"{meta['batch']} x {meta['seq']} tokens, KV cache off; each wave trains {meta['duration_s']:.0f} s from launch.", ""]
    else:
        lines += [f"Layout: one rank, torch's default threads on all {meta['cpus']} CPUs, nothing pinned: a "
                  "compile worker shares the training's cores. Model: the README demo's "
                  f"({meta['models'][0]}, {meta['layers']} blocks, hidden {meta['hidden']}, batch {meta['batch']} x "
                  f"{meta['seq']} tokens); each wave trains "
                  f"{meta['duration_s']:.0f} s from launch.", ""]
    lines += ["## Verdicts", "", *verdicts(layout, by), "", "## Steps completed and phases", "",
              "| model | N | setup | " + " | ".join(f"steps by {t} s" for t in MARKS[layout]) +
              " | first step | all compiled from | eager step | compiled step |", "|" + "---|" * (7 + len(MARKS[layout]))]
    for (model, n), c in sorted(by.items()):
        for key, res in c.items():
            ph = phases(res)
            if "error" in ph:
                lines.append(f"| {model} | {n} | {CURVES[key]} | error: {ph['error'][:120]} |")
                continue
            lines.append(f"| {model} | {n} | {CURVES[key]} | " + " | ".join(fmt(steps_by(res, t)) for t in MARKS[layout])
                         + f" | {ph['first_step_s']:.1f} s | {fmt(ph['compiled_from_s'], ' s')} | "
                         f"{fmt(ph['eager_step_ms'], ' ms')} | {fmt(ph['compiled_step_ms'], ' ms')} |")
    lines += ["", "## Memory", "",
              "Peak RSS of the rank within each step (VmHWM reset before it), the largest over its eager steps and "
              "over its compiled steps (step 0 apart: in wait mode the compile runs inside it), and the compile "
              "worker's own peak (reported by the worker with each region). The host compiler's processes are "
              "not counted in either.", "",
              "| model | N | setup | step 0 | eager steps | compiled steps | whole run | worker peak |",
              "|---|---|---|---|---|---|---|---|"]
    for (model, n), c in sorted(by.items()):
        for key, res in c.items():
            ph = phases(res)
            if "error" not in ph:
                lines.append(f"| {model} | {n} | {CURVES[key]} | {fmt(ph['first_step_peak_rss_mb'], ' MB')} | "
                             f"{fmt(ph['eager_peak_rss_mb'], ' MB')} | {fmt(ph['compiled_peak_rss_mb'], ' MB')} | "
                             f"{fmt(ph['process_peak_rss_mb'], ' MB')} | {fmt(ph['worker_peak_rss_mb'], ' MB')} |")
    lines += ["", "On a GPU the same split would be read from `torch.cuda.max_memory_allocated()` reset per step: "
              "the eager phase keeps every intermediate activation an unfused block saves for backward, where "
              "Inductor's compiled block recomputes or fuses some, so the eager phase is the one to budget device "
              "memory for. Not measured here: no GPU was lent to this run.", "",
              f"![steps completed against time]({plot.name})", ""]
    report.write_text("\n".join(lines))
    draw(by, layout, plot)


def draw(by: dict, layout: str, plot: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(by)
    cols = min(2, len(keys))
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.5 * rows), squeeze=False)
    for ax, (model, n) in zip(axes.flat, keys):
        for key, res in by[(model, n)].items():
            if "error" in res:
                continue
            ends = res["ranks"][0]["step_end_s"]
            ax.plot(ends, range(1, len(ends) + 1), label=CURVES[key])
        ax.set_title(f"{model}, N={n} ({layout})")
        ax.set_xlabel("seconds from launch")
        ax.set_ylabel("steps completed")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plot, dpi=90)


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results_gpu_node.json")
