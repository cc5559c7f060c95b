"""Runs the false-hit fuzzer: each generated case compiled cold in one
process and run warm under each of its mutation lists in others, every
warm output and gradient compared with eager in the same process.

    python -m falsehit.runner --seed 0 --cases 4 --warm 9 --out result.json [--traced] [--after-first-call]

Processes are forked from one parent that imported torch and kcache (and
ran nothing), so each cold or warm run is a fresh process state at a
fraction of an interpreter start; they share only kcache's node tier (one
directory per case) and nothing else. A run's result says which path
kcache took (PyTorch's and kcache's counters): "hit" (a block ran a
function loaded from the node tier), "fell back" (a portable check or a
hook sent a block to the traced path), "missed" (a key not stored: this
process compiled). A false hit is a warm run whose output or gradients
differ from eager's.

On the precompiled path (the default here), a block that falls back runs
eagerly instead of through torch.compile's traced path: what is under test
is the decision to use a stored function, and eager is what the traced
path must equal; `--traced` runs KCACHE_PRECOMPILED=0 with real
torch.compile everywhere (slower: every miss compiles).

`--cold-start background` (issue 51) compiles each case's cold run in
kcache's compile worker (docs/cold-start.md): the cold process runs its
blocks eagerly until the worker's regions land and switch, its compared
call runs on them, and every warm run (another process, waiting mode)
loads what the worker built. The worker rebuilt each block in a fresh
interpreter that imported the case's module without the cold run's
mutations: what it compiled must still be right for the process that
uses it, or be refused there. `alternate` does that for every other
seed (even seeds), so one run covers both.

`--after-first-call` (issue 49) changes when a warm run mutates: it builds
the model with the cold run's mutations, compiles it, runs one step (the
first call: a hit), and only then applies the mutations it adds; the
second step is the one compared with eager, on the same compiled model.
Its outcomes say what the second call did: "hit" (nothing watched
changed), "rechecked, hit" (a watched dict changed, the block's checks
passed again), "fell back", "hit, some blocks fell back" or "missed".

`--configs` (issue 67) draws the cases' mutations from the compiler's
settings instead (falsehit/configs.py: a flip of each classified config
entry, an Inductor custom pass, the matmul precision); each run compares
with stock torch.compile under the same settings, and a warm run whose
keyed settings no earlier run of its case stored must not hit
(`unkeyed_hits`), one that differs only by neutral settings from a stored
one should (`neutral_misses`). `--unkeyed ENTRY` (its positive control)
leaves that entry out of kcache's key, as before 2026-12-07.

`--switch-signature` (with `--after-first-call`) makes every other warm
run's compared call one under another call signature than its first
step's (generate.SIGNATURES: eval mode, no_grad, another batch size; one
per case), so that the mutations land before that signature's first call:
its checks run then, on a variant the cold run compiled and stored for it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import sys
import time
import traceback

import torch

import kcache
import kcache.api
import kcache.guards.call_watch
import kcache.precompiled

from . import configs, generate

TOL = 1e-4  # relative to the largest eager value (see _diff)
_KEYS = ("hits_node", "misses", "precompiled_blocks", "precompiled_fallbacks",
         "precompiled_check_failures", "precompiled_traces", "precompiled_trace_checks", "compiles",
         "verify_failures", "precompiled_rechecks", "precompiled_watch_refreshes", "precompiled_guard_failures")
_BACKGROUND = ("eager_block_calls", "background_jobs", "regions_switched", "background_refusals",
               "background_faults", "background_compile_seconds")
SWITCH_TIMEOUT_S = 420  # the worker's import and compile of one 3-block case on a loaded 2-core machine


def _in_child(fn, timeout: int = 600) -> dict:
    """fn() in a forked child; its JSON result (or the error it died of)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        code = 0
        try:
            signal.alarm(timeout)
            out = fn()
        except BaseException:  # noqa: BLE001 - reported to the parent
            out, code = {"error": traceback.format_exc()[-3000:]}, 1
        with os.fdopen(write, "w") as w:
            w.write(json.dumps(out))
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as r:
        text = r.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else {"error": "child died without a result"}


def _apply(m, model, mutations: list[str]) -> None:
    import functools
    import types

    from models import passes

    from kcache._torch_adaptor.config_table import config

    scope = {"m": m, "model": model, "blocks": list(model.blocks), "torch": torch,
             "functools": functools, "types": types, "config": config, "passes": passes}
    for snippet in mutations:
        exec(snippet, scope)  # noqa: S102 - the fuzzer's own generated snippets


def _diff(eager: list[torch.Tensor], other: list[torch.Tensor]) -> float:
    """The largest difference from eager, relative to the tensor's largest
    eager value (or absolute, where that is below 1): generated blocks chain
    scales, so gradients reach 1e4 and Inductor's reordered float math
    differs there by more than 1e-4 in absolute terms (the long run of
    2026-12-02 saw 7e-4, identical cold and warm); another model's result
    differs by a share of the value itself."""
    return max(((x.double() - y.double()).abs().max().item() / max(1.0, x.double().abs().max().item())
                for x, y in zip(eager, other)), default=0.0)


def _until_switched(compiled, x) -> dict:
    """Background mode: steps the compiled model (its blocks eager) until
    no block waits for its region any more (switched, refused to the
    waiting path, or orphaned by a worker fault); kcache's counters and
    timeline for the result. Waits on kcache's own state; the timeout only
    stops a broken run."""
    from kcache import background

    start, end, calls = kcache.stats(), time.monotonic() + SWITCH_TIMEOUT_S, 0
    while True:
        compiled(x.clone().requires_grad_(True)).square().mean().backward()
        calls += 1
        if not background.compiling():
            break
        if time.monotonic() > end:
            raise RuntimeError(f"regions not switched after {SWITCH_TIMEOUT_S} s: {background.current().timeline()}")
        time.sleep(0.05)
    after = kcache.stats()
    bg = background.current()
    return {"calls": calls, **{k: after[k] - start[k] for k in _BACKGROUND},
            "states": sorted({j["state"] for j in bg.timeline()}) if bg else [],
            "by": sorted({j["by"] for j in bg.timeline() if j.get("by")}) if bg else [],
            "notes": sorted({j["note"] for j in bg.timeline() if j.get("note")}) if bg else []}


def _signature_call(run, model, x, signature: str) -> tuple[list, list]:
    """One call of `run` under a call signature (generate.SIGNATURES, or
    "same"): its output and, where it ran a backward, the gradients."""
    if signature == "batch":
        x = torch.randn(3, generate.DIM, generator=torch.Generator().manual_seed(1))
    x = x.clone().requires_grad_(True)
    if signature == "eval":
        run.eval()
        model.eval()
    try:
        if signature == "no_grad":
            with torch.no_grad():
                return [run(x)], []
        out = run(x)
        out.square().mean().backward()
        return [out.detach()], [p.grad.clone() for p in model.parameters() if p.grad is not None]
    finally:
        run.train()
        model.train()


def _run(case_dir: pathlib.Path, name: str, mutations: list[str], inductor: str, traced: bool,
         node: str = "node", before_first: list[str] | None = None, watch: bool = True,
         background: bool = False, signature: str = "same", prepare: tuple[str, ...] = (),
         stock: bool = False) -> dict:
    """One process: build the case's model, mutate it, eager then kcache.

    With `before_first` (the after-first-call mode) only those mutations
    are applied before the compiled model's first step; the rest of
    `mutations` after it, and the second step is compared. With
    `background` (a cold run), the compiled model steps eagerly until its
    compile worker's regions switch, and the call after that is compared.
    The compared call runs under `signature`; a cold run then calls the
    compiled model once under each of `prepare`, storing their variants.
    With `stock` the reference is a copy of the model whose blocks stock
    torch.compile compiled under the same settings, not eager."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(case_dir / inductor)
    os.environ["KCACHE_LOCAL_DIR"] = str(case_dir / node)
    os.environ["KCACHE_COLD_START"] = "background" if background else "wait"
    os.environ["KCACHE_PRECOMPILED"] = "0" if traced else "1"
    # A generated flip of inductor's trace.* writes debug output there, not in the checkout.
    torch._dynamo.config.debug_dir_root = str(case_dir / "debug")
    torch.set_num_threads(1)
    if not traced and not stock:  # (under a custom pass, eager is not what the traced path computes)
        kcache.precompiled.PrecompiledRegion._traced = lambda self, block, slots: block
    if not watch:  # the positive control: checks on the first call only, as before issue 49
        kcache.guards.call_watch.collect = lambda *a, **k: None
    sys.path.insert(0, str(case_dir))
    m = __import__(name)
    torch.manual_seed(0)
    model = m.Stack()
    x = torch.randn(2, generate.DIM)
    compiled, switched, reference = None, None, model
    if before_first is None:
        _apply(m, model, mutations)
        if stock:
            import copy

            reference = copy.deepcopy(model)
            for block in reference.blocks:
                block.compile()
        if background:
            compiled = kcache.compile_regions(model)
            switched = _until_switched(compiled, x)
    else:
        _apply(m, model, before_first)
        compiled = kcache.compile_regions(model)
        compiled(x.clone().requires_grad_(True)).square().mean().backward()
        _apply(m, model, mutations[len(before_first):])
    # The reference first (eager, or stock torch.compile, whose own traces
    # the counters below leave out), then kcache's compiled model.
    for p in reference.parameters():
        p.grad = None
    results = [_signature_call(reference, reference, x, signature)]
    before = kcache.stats()
    dynamo = _dynamo_frames()
    for p in model.parameters():
        p.grad = None
    run = compiled or kcache.compile_regions(model)
    results.append(_signature_call(run, model, x, signature))
    after = kcache.stats()
    for other in prepare:  # after the counters: the compared call's delta is its own
        _signature_call(run, model, x, other)
    delta = {k: after[k] - before[k] for k in _KEYS}
    delta["dynamo_frames"] = _dynamo_frames() - dynamo
    out = {"signature": signature,
           "out_diff": _diff(results[0][0], results[1][0]), "grad_diff": _diff(results[0][1], results[1][1]),
           "grads": len(results[1][1]), "delta": delta,
           "check_failures": [f for o in kcache.api.region_outcomes() for f in o.get("check_failures", [])]}
    if switched is not None:
        out["background"] = switched
    return out


def _dynamo_frames() -> int:
    from kcache import _torch_adaptor as adaptor

    return adaptor.counters().get("stats", {}).get("unique_graphs", 0)


def classify(r: dict, traced: bool, after_first: bool = False) -> str:
    """missed: this process compiled; hit: a block ran a stored function
    (precompiled) or a stored region (traced); fell back: every block took
    the traced path after a check or a hook. After the first call (the
    blocks already installed): whether the watch saw a change and the
    recheck passed ("rechecked, hit") or sent blocks elsewhere."""
    d = r["delta"]
    if d["misses"] or d["compiles"]:
        return "missed"
    if traced:
        return "hit" if d["hits_node"] else "traced"
    if after_first:
        fell = d["precompiled_check_failures"] or d["precompiled_fallbacks"] or d["precompiled_guard_failures"]
        if fell:
            return "hit, some blocks fell back" if d["precompiled_blocks"] else "fell back"
        return "rechecked, hit" if d["precompiled_rechecks"] else "hit"
    fell = d["precompiled_check_failures"] or d["precompiled_fallbacks"]
    if not d["precompiled_blocks"]:
        return "fell back" if fell else "traced"
    return "hit, some blocks fell back" if fell else "hit"


def run_case(work: pathlib.Path, seed: int, warm_runs: int, traced: bool,
             c: generate.Case | None = None, host_facts: pathlib.Path | None = None,
             after_first: bool = False, watch: bool = True, runs: set[int] | None = None,
             background: bool = False, switch: bool = False, stock: bool = False) -> dict:
    c = c or generate.case(seed, warm_runs)
    if switch:
        generate.switch_signatures(c)
    signatures = c.signatures or ["same"] * len(c.warm)
    case_dir = work / c.name
    case_dir.mkdir(parents=True, exist_ok=True)
    if host_facts:  # the node starts knowing its host (kcache/host_facts.py)
        shutil.copytree(host_facts / "host", case_dir / "node" / "host", dirs_exist_ok=True)
    (case_dir / f"{c.name}.py").write_text(c.source)
    t = time.perf_counter()
    prepare = tuple(sorted(set(signatures) - {"same"}))
    cold = _in_child(lambda: _run(case_dir, c.name, c.cold, "inductor-cold", traced, background=background,
                                  prepare=prepare, stock=stock))
    kinds = configs.classes() if stock else {}
    stored = {configs.keyed_set(c.cold, kinds)}
    cold["seconds"] = round(time.perf_counter() - t, 2)
    warm = []
    for i, mutations in enumerate(c.warm):
        if runs is not None and i not in runs:
            continue
        t = time.perf_counter()
        r = _in_child(lambda: _run(case_dir, c.name, mutations, f"inductor-warm-{i}", traced,
                                   before_first=c.cold if after_first else None, watch=watch,
                                   signature=signatures[i], stock=stock))
        r["seconds"] = round(time.perf_counter() - t, 2)
        r["mutations"] = mutations
        r["index"] = i
        r["added"] = mutations[len(c.cold):] if mutations[:len(c.cold)] == c.cold else mutations
        if "error" not in r:
            r["outcome"] = classify(r, traced, after_first)
            r["false_hit"] = r["out_diff"] > TOL or r["grad_diff"] > TOL
            if stock:  # config mode: was a region stored under exactly this run's keyed settings?
                keyed = configs.keyed_set(mutations, kinds)
                r["added_classes"] = [("pass" if s.startswith("torch._inductor.config.post_grad") else
                                       "precision" if s.startswith("torch.set_float32") else kinds.get(s, "?"))
                                      for s in r["added"]]
                r["settings_stored"] = keyed in stored
                r["unkeyed_hit"] = r["outcome"] == "hit" and keyed not in stored
                r["neutral_miss"] = r["outcome"] == "missed" and keyed in stored
                stored.add(keyed)
        warm.append(r)
    return {"seed": seed, "name": c.name, "features": c.features, "cold_mutations": c.cold,
            "cold_kinds": mutation_kinds(c.cold), "cold_start": "background" if background else "wait",
            "cold": cold, "warm": warm}


def mutation_kinds(snippets: list[str]) -> list[str]:
    return [kind for s in snippets for kind, listed in generate.MUTATIONS.items() if s in listed]


def summarize(cases: list[dict]) -> dict:
    warm = [w for c in cases for w in c["warm"]]
    outcomes: dict[str, int] = {}
    for w in warm:
        key = w.get("outcome", "error")
        outcomes[key] = outcomes.get(key, 0) + 1
    kinds: dict[str, int] = {}
    for w in warm:
        for kind in mutation_kinds(w["added"]) or ["same as cold"]:
            kinds[kind] = kinds.get(kind, 0) + 1
    by_signature: dict[str, dict[str, int]] = {}
    for w in warm:
        seen = by_signature.setdefault(w.get("signature", "same"), {})
        seen[w.get("outcome", "error")] = seen.get(w.get("outcome", "error"), 0) + 1
    return {"cases": len(cases), "warm_runs": len(warm), "outcomes": outcomes,
            "outcomes_by_signature": dict(sorted(by_signature.items())),
            "false_hits": sum(1 for w in warm if w.get("false_hit")),
            "unkeyed_hits": sum(1 for w in warm if w.get("unkeyed_hit")),
            "neutral_misses": sum(1 for w in warm if w.get("neutral_miss")),
            "errors": sum(1 for w in warm if "error" in w) + sum(1 for c in cases if "error" in c["cold"]),
            "background_cold": _background_summary(cases),
            "mutation_kinds": dict(sorted(kinds.items()))}


def _background_summary(cases: list[dict]) -> dict:
    """The cold runs in background mode: how many, how many had a region
    built by the worker and switched to (what the warm runs then load),
    and how many had one refused to the waiting path (the rank compiled)."""
    bg = [c["cold"]["background"] for c in cases if "background" in c["cold"]]
    return {"cases": len(bg), "switched": sum(1 for b in bg if b["regions_switched"]),
            "refused": sum(1 for b in bg if b["background_refusals"]),
            "faults": sum(b["background_faults"] for b in bg)}


def _preimport() -> None:
    """What every child would import again: once, in the parent (the
    children still run nothing the parent ran)."""
    import torch._dynamo.aot_compile  # noqa: F401
    import torch._inductor.codecache  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=4)
    ap.add_argument("--warm", type=int, default=9, help="warm runs per case")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--traced", action="store_true")
    ap.add_argument("--every-kind", action="store_true", help="one all-features case, each mutation once")
    ap.add_argument("--globals-changed", action="store_true",
                    help="the all-features case, every module global changed cold (generate.globals_changed)")
    ap.add_argument("--hooks-changed", action="store_true",
                    help="the all-features case, hooks on every block cold (generate.hooks_changed)")
    ap.add_argument("--after-first-call", action="store_true",
                    help="warm runs mutate after the compiled model's first step (issue 49)")
    ap.add_argument("--cold-start", choices=["wait", "background", "alternate"], default="wait",
                    help="background: each case's cold run compiles in kcache's compile worker (issue 51); "
                         "alternate: even seeds so, odd seeds waiting")
    ap.add_argument("--switch-signature", action="store_true",
                    help="with --after-first-call: every other warm run compares a call under another "
                         "call signature (eval, no_grad or another batch size: one per case)")
    ap.add_argument("--plain-class-memo", action="store_true",
                    help="the positive control of --switch-signature: class descriptions shared between "
                         "first calls without their version tags (as before 2026-12-06)")
    ap.add_argument("--configs", action="store_true",
                    help="mutations are compiler settings (falsehit/configs.py); stock torch.compile is the "
                         "reference (issue 67)")
    ap.add_argument("--unkeyed", metavar="ENTRY",
                    help="the positive control of --configs: ENTRY (module.name, e.g. "
                         "inductor.post_grad_custom_post_pass) left out of kcache's key")
    ap.add_argument("--runs", help="only these warm runs of each case, by index (e.g. 1,17): regression tests")
    ap.add_argument("--no-watch", action="store_true",
                    help="the positive control of --after-first-call: no checks after a block's first call")
    ap.add_argument("--single", nargs=2, metavar=("NODE", "INDUCTOR"),
                    help="one run of the all-features case --seed (generate.every_kind) in this "
                         "process, node tier and Inductor dir "
                         "named under --work, mutations from --mutation; prints its JSON")
    ap.add_argument("--mutation", action="append", default=[])
    ap.add_argument("--host-facts", type=pathlib.Path,
                    help="a node directory whose host/ records (Inductor's ISA check verdicts) each "
                         "case's node starts with: the cold process then builds no ISA probes")
    args = ap.parse_args(argv)
    if args.plain_class_memo:  # inherited by the forked children
        import kcache.guards.class_memo

        kcache.guards.class_memo.ClassMemo = dict  # the process's memo is made on first use
    if args.unkeyed:  # inherited by the forked children
        from kcache._torch_adaptor import config_key, config_table

        short, name = args.unkeyed.split(".", 1)
        config_table.KEYED.get(short, {}).pop(name, None)
        config_table.NEUTRAL.setdefault(short, {})[name] = "left out by --unkeyed (positive control)"
        config_table.PASS_ENTRIES[short] = config_table.PASS_ENTRIES.get(short, frozenset()) - {name}
        config_key._beyond.cache_clear()
    if args.single:
        c = generate.every_kind(args.seed)
        case_dir = pathlib.Path(args.work) / c.name
        case_dir.mkdir(parents=True, exist_ok=True)
        (case_dir / f"{c.name}.py").write_text(c.source)
        print(json.dumps(_run(case_dir, c.name, args.mutation, args.single[1], args.traced,
                              node=args.single[0])))
        return 0
    _preimport()
    start = time.perf_counter()
    cases = []
    for seed in range(args.seed, args.seed + args.cases):
        one = (configs.case(seed, args.warm) if args.configs else
               generate.every_kind(seed) if args.every_kind else
               generate.globals_changed(seed) if args.globals_changed else
               generate.hooks_changed(seed) if args.hooks_changed else None)
        cases.append(run_case(pathlib.Path(args.work), seed, args.warm, args.traced, one, args.host_facts,
                              args.after_first_call, not args.no_watch,
                              {int(i) for i in args.runs.split(",")} if args.runs else None,
                              args.cold_start == "background" or (args.cold_start == "alternate" and seed % 2 == 0),
                              args.switch_signature, args.configs))
        s = summarize(cases)
        print(f"case {seed}: {s['warm_runs']} warm runs, {s['false_hits']} false hits, "
              f"{s['outcomes']}", flush=True)
    result = {"mode": "traced" if args.traced else "precompiled", "cold_start": args.cold_start,
              "mutate": "after the first call" if args.after_first_call else "between processes",
              "switch_signature": args.switch_signature, "plain_class_memo": args.plain_class_memo,
              "configs": args.configs, "unkeyed": args.unkeyed,
              "seed": args.seed,
              "seconds": round(time.perf_counter() - start, 1), "summary": summarize(cases),
              "torch": torch.__version__, "cases": cases}
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
