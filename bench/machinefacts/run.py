"""What a fresh container pays before its first region can be keyed, with
and without its machine type's facts on the server (issue 52).

    .venv/bin/python bench/machinefacts/run.py [--rounds 5]

One kcache-server (disk storage). A first process on a fresh node publishes
this machine's record (kcache.artifacts.machine_facts) and the ISA probe
binaries. Then, in interleaved rounds, two kinds of fresh container (a new
node directory and a new Inductor directory each, a fresh process):

  facts      today's kcache: the record from the server, no probe runs
  no-facts   the same job with the record's lookup switched off in-process
             (what kcache did before): the probe binaries from the server,
             Inductor's checks loaded in child Pythons, -march=native asked

Each reports the wall time of `isa_probes.ensure()` plus the target field
(`-march=native`), the probes that ran, and the child loads. Medians, and
facts / no-facts. Writes bench/machinefacts/results.json and REPORT.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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

JOB = r"""
import json, sys, time
start = time.perf_counter()
import torch
from torch._inductor import cpu_vec_isa as isa
from kcache.artifacts import isa_probes
from kcache.keys import fields as keyfields
from kcache.state import counters, store
imported = time.perf_counter()
loads = []
real_load = isa.VecISA._probe_load
def probe_load(self, path):
    loads.append(str(self))
    return real_load(self, path)
isa.VecISA._probe_load = probe_load
if sys.argv[1] == "no-facts":
    isa_probes._machine_record = lambda client, probed: {}
client = store.get_store()
t0 = time.perf_counter()
isa_probes.ensure(client)
target = keyfields.target_field("cpu")
seconds = time.perf_counter() - t0
c = counters.get()
print(json.dumps({"seconds": seconds, "import_seconds": imported - start, "target": target,
                  "probes_run": c.isa_probes_run, "facts_hits": c.machine_facts_hits,
                  "child_loads": len(loads)}))
"""


def run(work: Path, url: str, name: str, mode: str) -> dict:
    node = work / f"node-{name}"
    node.mkdir(mode=0o700)
    env = dict(os.environ, KCACHE_URL=url, KCACHE_LOCAL_DIR=str(node), KCACHE_COLD_START="wait",
               TORCHINDUCTOR_CACHE_DIR=str(work / f"inductor-{name}"))
    out = subprocess.run([sys.executable, "-c", JOB, mode], env=env, capture_output=True, text=True,
                         timeout=900)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kcache-machinefacts-") as tmp:
        work = Path(tmp)
        _proc, url = services.start_server(work, f"disk:{work / 'store'}")
        try:
            first = run(work, url, "first", "facts")
            rows: dict[str, list[dict]] = {"facts": [], "no-facts": []}
            for i in range(a.rounds):
                for mode in ("no-facts", "facts") if i % 2 else ("facts", "no-facts"):
                    rows[mode].append(run(work, url, f"{mode}-{i}", mode))
        finally:
            services.stop_all()
    med = {m: statistics.median(r["seconds"] for r in rs) for m, rs in rows.items()}
    result = {
        "command": "bench/machinefacts/run.py --rounds %d" % a.rounds,
        "when": time.strftime("%Y-%m-%d %H:%M"), "host": platform.node(), "cpu": first["target"],
        "load_average_at_start": os.getloadavg()[0],
        "first": first, "rounds": rows, "median_seconds": med,
        "ratio_facts_over_no_facts": med["facts"] / med["no-facts"],
        "facts_never_probed": all(r["probes_run"] == 0 and r["child_loads"] == 0 and r["facts_hits"] == 1
                                  for r in rows["facts"]),
        "no_facts_probed": all(r["probes_run"] > 0 and r["child_loads"] > 0 for r in rows["no-facts"]),
        "same_target": len({r["target"] for rs in rows.values() for r in rs} | {first["target"]}) == 1,
    }
    (HERE / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (HERE / "REPORT.md").write_text(report(result))
    print(report(result))


def report(r: dict) -> str:
    ok = r["facts_never_probed"] and r["no_facts_probed"] and r["same_target"]
    return "\n".join([
        "# Machine facts from the server: a fresh container's probe cost",
        "",
        f"Generated from bench/machinefacts/results.json (`.venv/bin/python {r['command']}`, "
        f"{r['when']}, {r['host']}, load average {r['load_average_at_start']:.2f} at start). "
        f"Target field: `{r['cpu']}`.",
        "",
        "| fresh container | median seconds (ISA checks + target field) | probes run | child loads |",
        "|---|---|---|---|",
        *[f"| {m} | {r['median_seconds'][m]:.3f} | {sorted({x['probes_run'] for x in r['rounds'][m]})} | "
          f"{sorted({x['child_loads'] for x in r['rounds'][m]})} |" for m in ("no-facts", "facts")],
        "",
        f"facts / no-facts: {r['ratio_facts_over_no_facts']:.3f}; the first container of the machine type "
        f"(it probed and published the record): {r['first']['seconds']:.3f} s, "
        f"{r['first']['probes_run']} probes run.",
        "",
        f"Verdict: {'the record replaced every probe, with the same target field' if ok else 'NOT MET: see results.json'}. "
        "On this machine's CPU the probe libraries come from the server in both rows (only their checks "
        "run in no-facts); a host that must also build them pays about 10 s more there "
        "(kcache/artifacts/isa_probes.py).",
        "",
    ])


if __name__ == "__main__":
    main()
