#!/usr/bin/env python3
"""A capacity plan on paper for a fleet of 10,000 GPUs (1,250 nodes of 8)
on kcache-server and a Redis Cluster, computed from figures measured in this
repository (each read from its committed results file, which names the
command that made it) and from assumptions, each labelled as one.

    .venv/bin/python bench/storage/capacity_plan.py     # writes bench/storage/CAPACITY_PLAN.md

docs/operations.md "Capacity plan: 10,000 GPUs" summarises the result.
"""

from __future__ import annotations

import json
import pathlib
import statistics

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]


def load(rel: str):
    return json.loads((REPO / rel).read_text())


def fmt_bytes(b: float) -> str:
    for unit, div in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= div:
            return f"{b / div:,.1f} {unit}"
    return f"{b:,.0f} B"


def measured() -> dict:
    """Every measured input, with where it comes from."""
    m = {}
    # Artifact sizes: bundles per job and bytes, CPU targets (nothing has run on a GPU yet).
    cs = load("bench/coldstart/results_4layers.json")
    restart16 = next(r for r in cs["results"] if r["setup"] == "precompiled" and r["n"] == 16)["restart"]
    cold16 = next(r for r in cs["results"] if r["setup"] == "precompiled" and r["n"] == 16)["cold"]
    per_rank = restart16["ranks"][0]["kcache"]["client"]
    m["job_bundles"] = (per_rank["server_hits"], "bench/coldstart/results_4layers.json: results[precompiled, n=16].restart"
                        ".ranks[0].kcache.client.server_hits (`bench/coldstart/run.py`, GPT-2 4 blocks, "
                        "bench/coldstart/REPORT_4layers.md)")
    m["job_bytes"] = (per_rank["bytes_fetched"], "same file, .client.bytes_fetched")
    m["cold16"] = ({k: cold16["server"][k] for k in ("kcache_http_requests_total", "kcache_uploads_total",
                                                      "kcache_leases_granted_total", "kcache_leases_waited_total",
                                                      "kcache_cache_hits_total")},
                   "same file, results[precompiled, n=16].cold.server (16 ranks, empty caches)")
    m["restart16_requests"] = (restart16["server"]["kcache_http_requests_total"],
                               "same file, results[precompiled, n=16].restart.server.kcache_http_requests_total")
    rg = load("bench/regional/results.json")
    m["regional"] = ([(r["family"], r["hidden"], r["batch"], r["kcache_cold"]["kcache"]["compiles"],
                       r["kcache_cold"]["kcache"]["bytes_stored"]) for r in rg],
                     "bench/regional/results.json: [].kcache_cold.kcache.{compiles,bytes_stored} "
                     "(`.venv/bin/python bench/regional/run.py`)")
    ao = load("bench/aoti/results.json")["models"]
    m["aoti"] = ([(name, v["cpp"]["prewarm"]["kcache"]["uploads"], v["cpp"]["prewarm"]["kcache"]["bytes_uploaded"])
                  for name, v in ao.items()],
                 "bench/aoti/results.json: models.*.cpp.prewarm.kcache.{uploads,bytes_uploaded} "
                 "(`.venv/bin/python bench/aoti/run.py`, AOTInductor packages)")
    dm = load("bench/demo/run.json")["cold"]["kcache"]["client"]
    m["demo"] = ((dm["uploads"], dm["bytes_uploaded"]),
                 "bench/demo/run.json: cold.kcache.client.{uploads,bytes_uploaded} (`bash scripts/demo.sh`)")
    ws = load("bench/warmstart/results.json")
    m["depth"] = ([(r["model"], r["layers"], r["cells"]["kcache_precompiled_cold"]["kcache"]["compiles"])
                   for r in ws["rows"]],
                  "bench/warmstart/results.json: rows[].cells.kcache_precompiled_cold.kcache.compiles "
                  "(`.venv/bin/python bench/warmstart/run.py`)")
    # Throughput through one kcache-server on Redis, and Redis's memory per byte.
    tp = load("bench/storage/cluster_throughput.json")
    import importlib.util
    spec = importlib.util.spec_from_file_location("tp", HERE / "cluster_throughput.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    s = mod.summarize(tp)
    for op in ("get", "put"):
        for size in (100 * 1024, 4 * 1024 * 1024):
            best = max(((k, v) for k, v in s.items() if k[1] == op and k[2] == size), key=lambda kv: kv[1]["rate"])
            per_core = max(v["rate"] / max(v["server_cores"], 1e-9) for k, v in s.items() if k[1] == op and k[2] == size)
            m[f"{op}_{size}"] = ((best[1]["rate"], best[0][0], best[0][3], per_core),
                                 f"bench/storage/cluster_throughput.json ({tp['meta']['command']}; "
                                 f"{tp['meta']['when']}): best median rate over storages and connection counts, "
                                 "and the best rate per kcache-server core")
    ratios = [x["used_memory_growth"] / x["bundle_bytes"] for sp in tp["spread"].values()
              for x in sp.get("memory", {}).values()]
    m["mem_ratio"] = (max(ratios) if ratios else float("nan"),
                      "bench/storage/cluster_throughput.json: spread.*.memory (used_memory growth / bundle bytes)")
    fo = [json.loads(line) for line in (HERE / "cluster_failover.jsonl").read_text().splitlines() if line.strip()]
    m["promotion"] = ((min(x["promoted_after_s"] for x in fo), max(x["promoted_after_s"] for x in fo)),
                      "bench/storage/cluster_failover.jsonl: promoted_after_s (`KCACHE_FAILOVER_REPORT=... pytest "
                      "tests/python/server/test_cluster_failover.py`, cluster-node-timeout 3 s)")
    # Small-command rate of one redis-server on this VM (the index and lease scripts are such commands).
    m["redis_small_ops"] = (133_929, "bench/server/REPORT.md, 'redis-server reference': redis-benchmark SET 1 KB, "
                                     "32 connections, -P 1 (`bench/server/run.sh`)")
    return m


# Assumptions: nothing in this repository measures these.
ASSUME = {
    "nodes": (1250, "A1 — the fleet: 1,250 nodes of 8 GPUs (10,000 GPUs), one job per node"),
    "gpus_per_node": (8, "A1"),
    "bundle_bytes": ((100 * 1024, 4 * 1024 * 1024),
                     "A2 — bytes of one region's bundle on a GPU. Nothing has run on a GPU here (docs/STATUS.md); "
                     "the CPU bundles measured are 40-400 KB. A GPU region carries Triton kernels (cubin, source, "
                     "autotuning results) for each fused op: taken as 100 KB (low, the CPU scale) to 4 MB (high); "
                     "the benchmark measures both sizes"),
    "bundles_per_model": ((16, 50),
                          "A3 — bundles per model: 16 measured for the 4-block GPT-2 job (and depth-independent: "
                          "identical blocks share a key, see the warm-start rows); 50 for a large model with several "
                          "distinct block shapes, graph breaks and a backward per region"),
    "models": (20, "A4 — distinct model configurations in use at one time across the fleet"),
    "gpu_generations": (3, "A5 — GPU generations (each a distinct cuda:sm_XX target in the key, docs/keys.md)"),
    "torch_versions": (2, "A6 — torch versions live at once (each a distinct toolchain field in the key)"),
    "variants": (2, "A7 — variants per model (train and inference, or two dtypes)"),
    "history": (1.5, "A8 — LRU keeps about 1.5x the live working set (old toolchains ageing out)"),
    "window_s": (60, "A9 — a fleet-wide cold start: every node starts the same new job within 60 s "
                     "(after a torch upgrade, or a restart of the whole fleet)"),
    "nic_Bps": (25e9 / 8, "A10 — each server (kcache-server or Redis master) has a 25 Gb/s NIC: 3.1 GB/s each way"),
    "cores": (16, "A11 — a kcache-server machine has 16 cores, each as fast as one of this VM's"),
    "master_mem": (64e9, "A12 — a Redis master machine has 64 GB of RAM; maxmemory at 50 % of it leaves room "
                         "for a BGSAVE's copy-on-write and the OS"),
}


def plan() -> str:
    m = measured()
    a = {k: v[0] for k, v in ASSUME.items()}
    lines = ["# Capacity plan: 10,000 GPUs on kcache-server and a Redis Cluster", "",
             "Generated by `.venv/bin/python bench/storage/capacity_plan.py` from the committed results files "
             "named below; docs/operations.md \"Capacity plan: 10,000 GPUs\" summarises it. **M** rows are "
             "measured here (file, field, and the command that wrote it); **A** rows are assumptions; every "
             "other figure is computed from those two.", "", "## Measured (M)", ""]
    jb, jbytes = m["job_bundles"][0], m["job_bytes"][0]
    lines += [
        f"- **M1** one job's bundles and bytes (GPT-2, 4 blocks of width 64, CPU, precompiled regions): "
        f"{jb} bundles, {jbytes:,} bytes, {jbytes / jb / 1e3:,.0f} KB per bundle. — {m['job_bundles'][1]}; "
        f"{m['job_bytes'][1]}",
        "- **M2** per model (bench/regional, inference, 12 blocks): " + "; ".join(
            f"{f} h{h} b{b}: {c} bundles, {by:,} B ({by / c / 1e3:,.0f} KB each)" for f, h, b, c, by in m["regional"][0])
        + f". — {m['regional'][1]}",
        "- **M3** AOTInductor packages: " + "; ".join(
            f"{n}: {u} regions, {b:,} B ({b / u / 1e3:,.0f} KB each)" for n, u, b in m["aoti"][0])
        + f". — {m['aoti'][1]}",
        f"- **M4** the demo job: {m['demo'][0][0]} uploads, {m['demo'][0][1]:,} B "
        f"({m['demo'][0][1] / m['demo'][0][0] / 1e3:,.0f} KB each). — {m['demo'][1]}",
        "- **M5** bundles do not grow with depth: " + "; ".join(
            f"{mo} {la} layers: {c} compiled" for mo, la, c in m["depth"][0]) + f". — {m['depth'][1]}",
        f"- **M6** a cold wave of 16 ranks (each a machine of its own) on one server: {m['cold16'][0]}; "
        f"the restart wave: {m['restart16_requests'][0]:.0f} requests, i.e. one GET per bundle per rank plus one. "
        f"Uploads stay at one per bundle however many ranks miss (single flight). — {m['cold16'][1]}; "
        f"{m['restart16_requests'][1]}",
        "- **M7** node tier: of the 8 ranks on a node, one downloads each bundle and 7 read the node tier "
        "(per-key flock). — docs/client.md \"The node tier\" (tests/cpp/client_node_tier_test.cpp: "
        "LockExcludesOtherHoldersUntilReleased, ThreadsOfOneProcessCompileOnce)",
    ]
    for op, name in (("get", "hits"), ("put", "uploads")):
        for size, sz in ((100 * 1024, "100 KB"), (4 * 1024 * 1024, "4 MB")):
            (rate, storage, conns, per_core), src = m[f"{op}_{size}"]
            lines.append(f"- **M8** {name}/s through one kcache-server on Redis, {sz}: {rate:,.0f}/s "
                         f"({storage}, {conns} connections; {rate * size / 1e6:,.0f} MB/s), "
                         f"{per_core:,.0f}/s per kcache-server core. — {src}")
    lines += [
        f"- **M9** Redis memory per artifact byte: {m['mem_ratio'][0]:.3f}. — {m['mem_ratio'][1]}",
        f"- **M10** failover: a replica promoted {m['promotion'][0][0]:.1f}-{m['promotion'][0][1]:.1f} s after its "
        f"master's kill -9. — {m['promotion'][1]}",
        f"- **M11** one redis-server's rate of small commands: {m['redis_small_ops'][0]:,}/s. — "
        f"{m['redis_small_ops'][1]}",
        "", "## Assumptions (A)", ""]
    for k, (v, why) in ASSUME.items():
        if " — " in why:  # the others restate one of these
            label, text = why.split(" — ", 1)
            lines.append(f"- **{label}** {text}")
    lines += ["", "## Computed", "",
              "Two cases: **low** (100 KB bundles, 16 per model) and **high** (4 MB bundles, 50 per model).", "",
              "| figure | low | high | how |", "| --- | ---: | ---: | --- |"]
    rows = []
    cases = []
    for size, per_model in ((a["bundle_bytes"][0], a["bundles_per_model"][0]),
                            (a["bundle_bytes"][1], a["bundles_per_model"][1])):
        c = {}
        c["per_gen_torch_bytes"] = a["models"] * per_model * a["variants"] * size
        c["keys"] = a["models"] * per_model * a["gpu_generations"] * a["torch_versions"] * a["variants"]
        c["live_bytes"] = c["keys"] * size
        c["stored_bytes"] = c["live_bytes"] * a["history"] * m["mem_ratio"][0]
        c["wave_gets"] = a["nodes"] * per_model
        c["wave_bytes"] = c["wave_gets"] * size
        c["wave_gets_s"] = c["wave_gets"] / a["window_s"]
        c["wave_Bps"] = c["wave_bytes"] / a["window_s"]
        c["uploads"] = per_model
        c["rank_requests_without_node_tier"] = a["nodes"] * a["gpus_per_node"] * per_model
        c["leases"] = a["nodes"] * per_model
        get_rate, _, _, get_core = m[f"get_{size}"][0]
        c["kcache_cores"] = c["wave_gets_s"] / get_core
        c["kcache_nic"] = c["wave_Bps"] / a["nic_Bps"]
        c["replicas"] = max(2, int(max(c["kcache_cores"] / a["cores"], c["kcache_nic"]) + 0.999)) + 1
        maxmem = a["master_mem"] * 0.5
        c["masters_mem"] = max(1, int(c["stored_bytes"] / maxmem + 0.999))
        c["masters"] = max(3, c["masters_mem"])
        c["per_master_bytes"] = c["stored_bytes"] / c["masters"]
        c["hot_key_bytes"] = a["nodes"] * size
        c["hot_key_s"] = c["hot_key_bytes"] / a["nic_Bps"]
        c["serial_wave_s"] = c["wave_bytes"] / a["nic_Bps"]
        c["index_ops_s"] = c["wave_gets_s"] * 2  # a hit touches the index (ZADD) and the entry's meta (script)
        cases.append(c)
    lo, hi = cases
    def row(name, key, f, how):
        rows.append(f"| {name} | {f(lo[key])} | {f(hi[key])} | {how} |")
    row("bytes per GPU generation × torch version", "per_gen_torch_bytes", fmt_bytes,
        "A4 models × A3 bundles × A7 variants × A2 size")
    row("distinct bundles (keys)", "keys", lambda v: f"{v:,}", "× A5 generations × A6 torch versions")
    row("live bytes", "live_bytes", fmt_bytes, "keys × A2 size")
    row("Redis memory, masters together (replicas double it)", "stored_bytes", fmt_bytes,
        "live × A8 history × M9")
    row("masters (memory: maxmemory 50 % of A12; at least 3)", "masters", lambda v: f"{v}", "")
    row("data per master", "per_master_bytes", fmt_bytes, "")
    row("server GETs in a fleet-wide cold start (node tier on)", "wave_gets", lambda v: f"{v:,}",
        "A1 nodes × A3 bundles (M6, M7: one GET per bundle per node)")
    row("… without the node tier (every rank)", "rank_requests_without_node_tier", lambda v: f"{v:,}", "× 8 (M7)")
    row("uploads in that wave", "uploads", lambda v: f"{v:,}", "one per bundle (M6: single flight)")
    row("lease requests in that wave", "leases", lambda v: f"{v:,}", "one per bundle per node; one granted each")
    row("GETs/s over the window", "wave_gets_s", lambda v: f"{v:,.0f}", "÷ A9 60 s")
    row("bytes served over the window", "wave_Bps", lambda v: fmt_bytes(v) + "/s", "GETs × A2 ÷ A9")
    row("kcache-server cores for those hits", "kcache_cores", lambda v: f"{v:,.1f}", "GETs/s ÷ M8 per core")
    row("kcache-server NICs for those bytes", "kcache_nic", lambda v: f"{v:,.2f}", "÷ A10 (each way)")
    row("kcache-server replicas (N+1, at least 3)", "replicas", lambda v: f"{v}", "max(cores ÷ A11, NICs) + 1")
    row("index + meta commands/s", "index_ops_s", lambda v: f"{v:,.0f}", "2 per hit; M11 is ~134k/s")
    row("one bundle fetched by every node at once", "hot_key_bytes", fmt_bytes, "A1 × A2, all from ONE master")
    row("… through that master's NIC", "hot_key_s", lambda v: f"{v:,.2f} s", "÷ A10")
    row("the whole wave, bundle after bundle, one master at a time", "serial_wave_s", lambda v: f"{v:,.1f} s",
        "wave bytes ÷ A10")
    lines += rows
    lines += ["", "## Where the first bottleneck appears", "",
              f"- **Memory is not it.** Even the high case is {fmt_bytes(hi['stored_bytes'])} of Redis memory, "
              f"{fmt_bytes(hi['per_master_bytes'])} per master on three masters; the low case fits one master "
              "many times over. The cluster is for availability (M10) and bandwidth, not capacity.",
              f"- **Request and command rates are not it.** {hi['wave_gets_s']:,.0f} GETs/s and "
              f"{hi['index_ops_s']:,.0f} index commands/s at the high case, against M8 and M11; uploads stay at "
              "one per bundle (single flight), tens per wave.",
              f"- **The first bottleneck is one master's NIC during a synchronized cold start.** One bundle is "
              f"one key on one master. When the fleet moves in lockstep — all nodes started within seconds "
              f"(a restart of the whole fleet), or parked behind the lease of a bundle being compiled, whose "
              f"landing wakes every waiter at once (M6: 180 lease waits for 16 ranks) — every node asks for the "
              f"same bundle at the same moment: {fmt_bytes(hi['hot_key_bytes'])} leave that master for every "
              f"4 MB bundle, {hi['hot_key_s']:.1f} s through a 25 Gb/s NIC. Jobs fetch their bundles in the "
              f"model's order, so in lockstep the wave's {fmt_bytes(hi['wave_bytes'])} leave roughly one master at "
              f"a time: {hi['serial_wave_s']:.0f} s, more than the 60 s window, however many masters there are "
              f"(more masters only help when the nodes are out of step, which spreads each moment's requests over "
              f"different bundles). In the low case it is {lo['serial_wave_s']:.1f} s: no bottleneck at all.",
              "- **Next: the kcache-server replicas' NICs**, which carry every served byte in and out "
              f"({hi['kcache_nic']:.1f} NICs' worth at the high case), then their CPU (SHA-256 of every bundle "
              "read).",
              "- **What would move the first bottleneck** (not built): a per-replica in-memory copy of hot bundles "
              "with Redis storage (today there is no hot tier with Redis: docs/operations.md \"Scaling out\"), "
              "which would read each bundle from its master once per kcache-server replica instead of once per "
              "node; reads from the masters' replicas (READONLY) to spread one key over two or three NICs; "
              "or staggering the fleet's start. The node tier (M7) already divides the load by 8."]
    return "\n".join(lines) + "\n"


def main() -> None:
    out = HERE / "CAPACITY_PLAN.md"
    out.write_text(plan())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
