"""REPORT.md from bench/distributed/results.json: one row per mode, N and
wave, and the verdicts the issue asks for, computed here from the data.

    .venv/bin/python bench/distributed/report.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def verdicts(r: dict) -> dict[str, bool]:
    """What a mode's cold and restart waves must show (docs/distributed.md)."""
    cold, restart = r.get("cold", {}), r.get("restart", {})
    if "ranks" not in cold or "ranks" not in restart:
        return {"ran": False}
    keys = [x["keys"] for x in cold["ranks"]]
    distinct = len(set(keys[0]))
    client_compiles = sum(x["kcache_client"]["compiles"] for x in cold["ranks"])
    if r["mode"].endswith("-background"):
        out = background_verdicts(cold, restart, distinct)
        if r["mode"] == "deepspeed-z3-background":
            # ZeRO 3's graphs take the traced path: a restart compiles each
            # from PyTorch's caches, which must all hit (the carried graph's
            # entries, docs/cold-start.md "The traced path off the thread").
            out["restart: no FX-graph or AOTAutograd misses"] = all(
                x["fxgraph_misses"] == 0 and x["autograd_misses"] == 0 for x in restart["ranks"])
            out["cold: graphs compiled off the training threads (traced path)"] = all(
                any(j.get("path") == "traced" for j in x["timeline"]) for x in cold["ranks"])
        return out
    return {
        "ran": True,
        "same keys on every rank": all(k == keys[0] for k in keys + [x["keys"] for x in restart["ranks"]]),
        "cold wave built kernels (positive control)": cold["kernel_builds"] > 0,
        # One lease per region, plus Inductor's ISA probes entry.
        "each region compiled once cluster-wide":
            cold["server"]["kcache_leases_granted_total"] == distinct + 1 == client_compiles,
        "restart built no kernels": restart["kernel_builds"] == 0,
        "restart: no FX-graph or AOTAutograd misses":
            all(x["fxgraph_misses"] == 0 and x["autograd_misses"] == 0 for x in restart["ranks"]),
        "restart: restored from the server": all(x["kcache_client"]["server_hits"] > 0 for x in restart["ranks"]),
        "restart losses equal the cold wave's on every rank":
            [x["losses"] for x in restart["ranks"]] == [x["losses"] for x in cold["ranks"]],
    }


def background_verdicts(cold: dict, restart: dict, distinct: int) -> dict[str, bool]:
    """A cold wave that does not wait (docs/cold-start.md): its first step
    eager on every rank, every region compiled once cluster-wide by the
    ranks' compile workers, every rank on compiled regions at the end; the
    restart wave as in the other modes, its losses within 1e-4 of the cold
    wave's (not bit-identical: the cold wave mixed eager and compiled)."""
    def close(a: list[float], b: list[float]) -> bool:
        return len(a) <= len(b) and all(abs(x - y) <= 1e-4 for x, y in zip(a, b))

    return {
        "ran": True,
        "same keys on every rank": all(x["keys"] == cold["ranks"][0]["keys"] for x in cold["ranks"] + restart["ranks"]),
        "cold: the first step ran eagerly on every rank": all(0 in x["eager_steps"] for x in cold["ranks"]),
        "cold wave built kernels (positive control)": cold["kernel_builds"] > 0,
        # One lease per region, plus Inductor's ISA probes entry and the
        # machine-facts record (docs/keys.md; rows of the other modes predate
        # it); the ranks themselves compiled nothing (their workers did).
        "each region compiled once cluster-wide, off the training threads":
            cold["server"]["kcache_leases_granted_total"] == distinct + 2
            and sum(x["kcache_client"]["compiles"] for x in cold["ranks"]) == 0,
        "cold: every rank ends on compiled regions":
            all(x["timeline"] and {j["state"] for j in x["timeline"]} == {"switched"}
                and x["steps"] - 1 not in x["eager_steps"] for x in cold["ranks"]),
        "restart built no kernels": restart["kernel_builds"] == 0,
        "restart: no eager phase": all(not x["eager_steps"] and not x["timeline"] for x in restart["ranks"]),
        "restart: restored from the server": all(x["kcache_client"]["server_hits"] > 0 for x in restart["ranks"]),
        "restart losses within 1e-4 of the cold wave's on every rank":
            all(close(b["losses"], a["losses"]) for a, b in zip(cold["ranks"], restart["ranks"])),
    }


def notes(data: dict) -> list[str]:
    """Where a restart still misses: the counters that say why, per rank."""
    out = []
    for r in data["results"]:
        restart = r.get("restart", {})
        if "ranks" not in restart:
            continue
        odd = [x for x in restart["ranks"] if x["autograd_misses"] or x.get("autograd_bypasses") or x.get("not_stored")]
        if odd:
            acc = r.get("versions", data["meta"]["versions"])["accelerate"]
            out.append(f"- {r['mode']}, N = {r['n']}, accelerate {acc}, restart: " + "; ".join(
                f"rank {x['rank']}: {x['autograd_misses']} AOTAutograd misses, {x.get('autograd_bypasses', '?')} "
                f"AOTAutograd bypasses, {x.get('not_stored', '?')} regions kcache could not store (nothing in "
                f"PyTorch's caches)" for x in odd))
    rev = sorted({r.get("kcache_rev", "before rows recorded it") for r in data["results"]})
    unrecorded = [f"{r['mode']} N={r['n']}" for r in data["results"] if "ranks" in r.get("restart", {})
                  and any("not_stored" not in x for x in r["restart"]["ranks"])]
    out = out or ["- Every restart wave: no AOTAutograd miss on any rank"
                  + (", and, where recorded, no AOTAutograd bypass and every region stored "
                     f"(not recorded in: {', '.join(unrecorded)})" if unrecorded else
                     ", no AOTAutograd bypass, every region stored") + "."]
    return (["", "## Notes", "", *out, "", "kcache revision of each row's checkout: "
             + "; ".join(f"`{v}`: " + ", ".join(f"{r['mode']} N={r['n']} (accelerate "
                                                 f"{r.get('versions', data['meta']['versions'])['accelerate']})"
                                                 for r in data["results"]
                                                 if r.get("kcache_rev", "before rows recorded it") == v)
                         for v in rev) + "."])


MODES = ("ddp", "fsdp2", "deepspeed-z2", "deepspeed-z3", "ddp-background", "deepspeed-z2-background",
         "deepspeed-z3-background", "fsdp2-background", "fsdp2-llama-background")


def write(results_path: Path, report_path: Path) -> None:
    data = json.loads(results_path.read_text())
    meta = data["meta"]
    # By N, then release (the pinned one first), then mode.
    data["results"].sort(key=lambda r: (
        r["n"], [int(x) for x in r.get("versions", meta["versions"])["accelerate"].split(".")],
        MODES.index(r["mode"]) if r["mode"] in MODES else len(MODES)))
    lines = ["# Accelerate's distributed modes with kcache: cold and restart waves", "",
             f"Generated by bench/distributed/report.py from results.json "
             f"(`{meta['command']}`, {meta['date']}, {meta['cpus']} CPUs, "
             + ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
             + f"; GPT-2 (Llama in the -llama- modes), {meta['layers']} blocks, {meta['steps']} steps, gloo on loopback)"
             + "".join(f"; rows merged from `{e['command']}` ({e['date']})" for e in meta.get("earlier_runs", []))
             + ".", "",
             "Each rank has its own empty Inductor and node directories in both waves; the ranks share "
             "one fresh kcache-server (disk storage) per mode and N. Kernel builds are host-compiler "
             "runs that wrote an object or a library (bench/coldstart/cxx_counter.sh); a DeepSpeed "
             "cold wave's count includes DeepSpeed's own JIT build of its shared-memory op when the "
             "machine's torch-extensions cache is empty. Ready times are wall seconds on a 2-core "
             "machine shared with other work: compare counters, not times. \"All ranks ready\" is the end of "
             "every rank's first backward; in a cold wave that does not wait (the -background modes) that "
             "first step ran eagerly, and \"every block compiled\" is when every rank's last eager step "
             "ended (rows from before it was recorded leave it empty).", "",
             "| mode | N | accelerate / transformers | wave | model as prepared | all ranks ready (s) | "
             "every block compiled (s) | "
             "kernel builds | FX-graph misses | AOTAutograd misses | leases granted | server hits | region paths |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in data["results"]:
        v = r.get("versions", meta["versions"])
        rel = f"{v['accelerate']} / {v['transformers']}"
        for name in ("cold", "restart"):
            w = r.get(name)
            if not w:
                continue
            if "error" in w:
                lines.append(f"| {r['mode']} | {r['n']} | {rel} | {name} | failed: {w['error'][:120]!r} "
                             "| | | | | | | | |")
                continue
            ranks = w["ranks"]
            compiled = [x.get("all_compiled_s") for x in ranks]
            compiled_s = f"{max(compiled):.1f}" if compiled and None not in compiled else ""
            lines.append(
                f"| {r['mode']} | {r['n']} | {rel} | {name} | {ranks[0]['model_class']} | {w['all_ready_s']:.1f} "
                f"| {compiled_s} "
                f"| {w['kernel_builds']} | {sum(x['fxgraph_misses'] for x in ranks)} "
                f"| {sum(x['autograd_misses'] for x in ranks)} "
                f"| {w['server']['kcache_leases_granted_total']:.0f} "
                f"| {w['server']['kcache_cache_hits_total']:.0f} | {', '.join(ranks[0]['paths'])} |")
    lines += ["", "## Verdicts", ""]
    for r in data["results"]:
        v = verdicts(r)
        acc = r.get("versions", meta["versions"])["accelerate"]
        name = f"{r['mode']}, N = {r['n']}, accelerate {acc}"
        if not v.pop("ran"):
            lines.append(f"- **{name}: did not run** (see the table)")
            continue
        failed = [k for k, ok in v.items() if not ok]
        lines.append(f"- {name}: " + ("all hold: " + "; ".join(v) if not failed
                                      else "**NOT MET: " + "; ".join(failed) + "**"))
    lines += notes(data)
    report_path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results.json", HERE / "REPORT.md")
