"""REPORT.md from the false-hit fuzzer's results (bench/falsehit/run.sh):
counts, shares and the verdict, computed here from results-*.json."""

from __future__ import annotations

import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def load(pattern: str) -> list[dict]:
    return [{**json.loads(p.read_text()), "file": p.name} for p in sorted(HERE.glob(pattern))]


def merge(runs: list[dict]) -> dict:
    out = {"cases": 0, "warm_runs": 0, "false_hits": 0, "errors": 0, "outcomes": {},
           "mutation_kinds": {}, "seconds": 0.0, "error_lines": [],
           "trace_checked": 0, "trace_checked_hits": 0, "unchanged": 0, "unchanged_hits": 0}
    for r in runs:
        for c in r["cases"]:
            for w in [c["cold"], *c["warm"]]:
                if "error" in w:
                    last = w["error"].strip().splitlines()[-1]
                    out["error_lines"].append(f"{r.get('file', '?')}, {c['name']}: {last}")
        s = r["summary"]
        for k in ("cases", "warm_runs", "false_hits", "errors"):
            out[k] += s[k]
        for field in ("outcomes", "mutation_kinds"):
            for k, n in s[field].items():
                out[field][k] = out[field].get(k, 0) + n
        out["seconds"] = max(out["seconds"], r["seconds"])
        warm = [w for c in r["cases"] for w in c["warm"] if "error" not in w]
        out["unchanged"] += sum(1 for w in warm if not w["added"])
        out["unchanged_hits"] += sum(1 for w in warm if not w["added"] and w["outcome"] == "hit")
        out["trace_checked"] += sum(1 for w in warm if w["delta"].get("precompiled_trace_checks"))
        out["trace_checked_hits"] += sum(1 for w in warm if w["delta"].get("precompiled_trace_checks")
                                         and w["outcome"].startswith("hit"))
    return out


def table(counts: dict[str, int], total: int) -> list[str]:
    rows = ["| | runs | share |", "|---|---:|---:|"]
    rows += [f"| {k} | {n} | {100 * n / total:.1f}% |" for k, n in sorted(counts.items())]
    return rows


def section(title: str, m: dict, needed: int = 0) -> list[str]:
    valid = m["warm_runs"] - m["errors"]
    mutated = valid - m["mutation_kinds"].get("same as cold", 0)
    verdict = (f"PASS: 0 false hits in {valid} warm runs with a result" if m["false_hits"] == 0
               else f"FAIL: {m['false_hits']} false hits")
    lines = [f"## {title}", "", f"**{verdict}** in {m['warm_runs']} warm runs of {m['cases']} "
             f"generated blocks ({m['seconds']:.0f} s wall per worker).", ""]
    if needed:
        lines += [f"Issue 32 asks for at least {needed:,} generated mutations with 0 false hits: "
                  f"{mutated:,} warm runs added a mutation to the cold run's (the other "
                  f"{valid - mutated:,} repeat it exactly: the positive controls, which must hit), "
                  + ("met." if mutated >= needed and m["false_hits"] == 0 else "not met."), ""]
    lines += [f"Positive controls: {m['unchanged_hits']} of the {m['unchanged']} warm runs that repeat the "
              "cold run's mutations exactly hit.", ""]
    lines += ["What kcache did:", ""]
    lines += table(m["outcomes"], max(m["warm_runs"], 1))
    lines += ["", f"Runs in which a region was trace-checked (a guard without a portable check: "
              f"one Dynamo trace per variant and process, its graph compared with the stored "
              f"one): {m['trace_checked']}, of which {m['trace_checked_hits']} hit."]
    lines += ["", "Mutations added in the warm run beyond the cold run's (a run may add two):", ""]
    lines += table(m["mutation_kinds"], max(m["warm_runs"], 1))
    if m["error_lines"]:
        lines += ["", "Runs that ended in an error (no result, counted neither as a hit nor as a "
                  "false hit):", ""] + [f"- {e}" for e in m["error_lines"]]
    return lines + [""]


def config_section(runs: list[dict], control: list[dict]) -> list[str]:
    """The config mode (issue 67): compiler settings as the mutations."""
    warm = [w for r in runs for c in r["cases"] for w in c["warm"]]
    ok = [w for w in warm if "error" not in w]
    added: dict[str, int] = {}
    for w in ok:
        for cls in w.get("added_classes", []):
            added[cls] = added.get(cls, 0) + 1
    cold = sum(1 for r in runs for c in r["cases"])
    bg = sum(1 for r in runs for c in r["cases"] if c["cold_start"] == "background")
    false_hits = sum(1 for w in ok if w["false_hit"])
    unkeyed = sum(1 for w in ok if w.get("unkeyed_hit"))
    spurious = sum(1 for w in ok if w.get("neutral_miss"))
    ctl = [w for r in control for c in r["cases"] for w in c["warm"] if "error" not in w]
    ctl_found = sum(1 for w in ctl if w["false_hit"])
    verdict = ("PASS" if false_hits == 0 and unkeyed == 0 and ctl_found else "FAIL")
    lines = ["## Compiler settings (issue 67)", "",
             f"**{verdict}: {false_hits} false hits and {unkeyed} hits under keyed settings no earlier run "
             f"stored, in {len(ok)} warm runs** of {cold} generated blocks ({bg} cold runs compiled by the "
             "worker, the others on the training thread); each run compared with stock torch.compile "
             "under the same settings (tests/falsehit/configs.py). Spurious misses (a run that differs "
             f"from a stored one by neutral settings only, and missed): {spurious}.", "",
             "Settings of the warm runs that do not repeat the cold run's exactly, by class (docs/keys.md, "
             "\"Compiler configuration\"):", ""]
    lines += table(added, max(sum(added.values()), 1))
    lines += ["", f"Positive control (the custom pass left out of the key, `--unkeyed "
              f"inductor.post_grad_custom_post_pass`, each case's pass-toggling run): {ctl_found} false "
              f"hits in {len(ctl)} runs" + (" (found)." if ctl_found else " (NOT found)."), ""]
    errors = [w for w in warm if "error" in w]
    if errors:
        lines += [f"Runs that ended in an error: {len(errors)}.", ""]
    return lines


def main() -> None:
    pre, traced = merge(load("results-precompiled-*.json")), merge(load("results-traced.json"))
    after, between = load("results-after-first-*.json"), load("results-between-watch-*.json")
    background = load("results-background-*.json")
    configs = load("results-configs-*.json")
    torch = next((r["torch"] for r in load("results-*.json")), "?")
    lines = ["# The false-hit fuzzer's long run", "",
             "Generated by bench/falsehit/report.py from results-*.json, which "
             "`bench/falsehit/run.sh` wrote (torch " + torch + ", this machine's CPU). "
             "A false hit is a warm run whose output or gradients differ from eager's "
             "in the same process by more than 1e-4 of the largest eager value (or 1e-4, where "
             "that is below 1: tests/falsehit/runner.py `_diff`); tests/falsehit/generate.py lists "
             "the features and mutations. On the precompiled path a block that falls back "
             "runs eagerly (tests/falsehit/runner.py says why); the traced path runs real "
             "torch.compile.", ""]
    lines += ["Result files (each `python -m falsehit.runner --seed S --cases N --warm W` with "
              "PYTHONPATH=tests, as bench/falsehit/run.sh runs it):", ""]
    for r in load("results-*.json"):
        s = r["summary"]
        cold = ", cold runs in the compile worker" if r.get("cold_start") == "background" else ""
        lines.append(f"- {r['file']}: {r['mode']}{cold}, mutating {r.get('mutate', 'between processes')}, "
                     f"seeds {r['seed']}-{r['seed'] + s['cases'] - 1}, {s['warm_runs']} warm runs, "
                     f"{r['seconds']:.0f} s")
    lines.append("")
    lines += section("Precompiled path (KCACHE_PRECOMPILED=1)", pre, needed=2000)
    lines += section("Traced path (KCACHE_PRECOMPILED=0)", traced)
    if between:
        lines += section("Precompiled path with the per-call watch, mutating between processes (issue 49)",
                         merge(between))
    if background:
        m = merge(background)
        b = [r["summary"]["background_cold"] for r in background]
        cases, switched = sum(x["cases"] for x in b), sum(x["switched"] for x in b)
        lines += ["The next section's cold runs compiled in kcache's compile worker (issue 51, "
                  "`--cold-start background`, docs/cold-start.md): the cold process ran its blocks "
                  "eagerly until the worker's region landed, and every warm run (another process) "
                  f"loaded what the worker built. In {switched} of {cases} cases the worker built "
                  f"the region and the cold process switched to it; "
                  f"{sum(x['refused'] for x in b)} were refused to the training thread, "
                  f"{sum(x['faults'] for x in b)} worker faults. The cold run's module globals "
                  "reach the worker (kcache/background/global_state.py): a warm run repeating a "
                  "cold run that changed one is a positive control like the others.", ""]
        lines += section("Precompiled path, cold runs compiled by the worker (issue 51)", m)
    if configs:
        lines += config_section(configs, load("results-control-configs.json"))
    if after:
        lines += ["The next section's runs mutate after the compiled model's first step (a hit) and "
                  "compare the second step with eager (tests/falsehit/runner.py `--after-first-call`): "
                  "\"hit\" means nothing watched changed, \"rechecked, hit\" that a watched dict "
                  "changed and the block's checks passed again.", ""]
        lines += section("Precompiled path, mutating after the first call (issue 49)", merge(after))
    (HERE / "REPORT.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
