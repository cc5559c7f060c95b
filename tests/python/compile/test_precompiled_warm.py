"""Warm starts that skip Dynamo, end to end against a real kcache-server.

The demo job (examples/train_regional.py, 12 blocks, training) cold, then
warm in a fresh process with an empty node tier and an empty Inductor
directory: PyTorch's own counters and step log show no Dynamo trace at all,
no AOTAutograd or FX-graph cache miss; a wrapper installed as Inductor's
compiler counts zero kernel builds (and many in the cold run: the positive
control); the server counts the hits; losses and gradients of 50 AdamW
steps are bit-identical to the cold run's and agree with eager's to 1e-3
(this file replaced
test_training_equivalence.py in the thirteenth session: with precompiled
regions the default, that file's kcache runs repeated these). GPT-2's cold
phase is two ranks at once: one trace per region cluster-wide (it replaced
test_two_cold_ranks_trace_each_region_once_cluster_wide, a cold compile of
its own)."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from kc_testing import PYTHON, REPO, ServerProcess, python_env
from traced_job import is_build as _is_build, is_region_compile as _is_region_compile

JOB = str(REPO / "examples" / "train_regional.py")


def start_job(tmp_path, cxx, name, url, *extra, layers=12, steps=50):
    wrapper, _ = cxx
    log = tmp_path / f"cxx-{name}.log"
    # A fresh container: its own node tier, Inductor dir and temp dir (where
    # PyTorch keeps its precompiled kernel headers, outside the Inductor dir).
    tmp = tmp_path / f"tmp-{name}"
    tmp.mkdir(exist_ok=True)
    env = python_env(KCACHE_URL=url, KCACHE_PRECOMPILED="1", KCACHE_LOCAL_DIR=str(tmp_path / f"node-{name}"),
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{name}"), CXX=str(wrapper),
                     KCACHE_TEST_CXX_LOG=str(log), OMP_NUM_THREADS="1", TMPDIR=str(tmp))
    proc = subprocess.Popen([PYTHON, JOB, "--layers", str(layers), "--steps", str(steps), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, log


def finish(proc, log: pathlib.Path) -> dict:
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-4000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    lines = log.read_text().splitlines() if log.exists() else []
    result["region_compiles"] = [l for l in lines if _is_region_compile(l)]
    result["builds"] = [l for l in lines if _is_build(l)]
    # Every host-compiler run but kcache's `-march=native` query (preprocessing too).
    result["compiler_runs"] = [l for l in lines if "--help" not in l]
    result["stderr"] = stderr
    return result


def run_job(tmp_path, cxx, name, url, *extra, **kw) -> dict:
    return finish(*start_job(tmp_path, cxx, name, url, *extra, **kw))


def block_traces(result: dict) -> list[str]:
    """Dynamo traces of kcache's precompiled `call` (one per region compiled)."""
    return [t for t in result["dynamo_traced"] if t.startswith("call ") and "precompiled/entries.py" in t]


def differ(a_name, a, b_name, b):
    """A short account of two runs that should have matched."""
    first = next((i for i, (x, y) in enumerate(zip(a["losses"], b["losses"])) if x != y), -1)
    return (f"{a_name} and {b_name} differ from step {first}: "
            f"{a['losses'][first]!r} vs {b['losses'][first]!r}; "
            f"vec_isa {a['vec_isa']} vs {b['vec_isa']}; threads {a['threads']} vs {b['threads']}")


@pytest.mark.slow
@pytest.mark.fresh_node  # fresh containers: the ISA probes are built once and shared
@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_warm_start_traces_nothing_and_trains_bit_identically(tmp_path, cxx_wrapper, model):
    """Over a minute: the 12-block demo job cold (a compile of every region)
    and warm, 50 AdamW steps each; issue 32 requires this job unchanged.
    GPT-2's cold phase is two ranks at once (one Dynamo trace per region
    cluster-wide, whoever wins each lease). Both models also train
    eagerly: compiled agrees with eager. (That kcache computes what
    Accelerate's own compile_regions computes was a third training run of
    GPT-2 here, a cold compile of its own, until the fifteenth session; it
    is bench/coldstart's "Losses" verdicts now, docs/STATUS.md.)"""
    server = ServerProcess(tmp_path)
    try:
        ranks = 2 if model == "gpt2" else 1
        colds = [finish(*j) for j in [start_job(tmp_path, cxx_wrapper, f"cold{i}", server.url, "--model", model)
                                      for i in range(ranks)]]
        cold = colds[0]
        regions = [r for r in cold["regions"] if r["path"] == "precompiled"]
        # Every part of the model is precompiled; the repeated block is one
        # region: traced once for all 12 blocks, in one of the ranks
        # (positive controls: Dynamo traced, Inductor generated code, the
        # host compiler built kernels).
        assert len(regions) == len(cold["regions"]) >= 4
        assert all(len(c["regions"]) == len(regions) for c in colds)
        traces = sum(c["kcache"]["precompiled_traces"] for c in colds)
        assert traces == len(regions) == sum(len(block_traces(c)) for c in colds), [c["kcache"] for c in colds]
        assert sum(len(c["dynamo_traced"]) for c in colds) == len(regions), [c["dynamo_traced"] for c in colds]
        assert all(c["kcache"]["precompiled_blocks"] >= 12 + len(regions) - 1 for c in colds)
        assert sum(c["stats"].get("unique_graphs", 0) for c in colds) == len(regions)
        # (aot_compile bypasses the FX-graph cache lookup; AOTAutograd's
        # misses count the graphs Inductor compiled.)
        assert sum(c["aot_autograd"].get("autograd_cache_miss", 0) for c in colds) >= len(regions)
        assert sum(len(c["region_compiles"]) for c in colds) > 0
        after_cold = server.metrics()
        # Every region's index and first variant were uploaded once.
        # + the ISA probes entry and this machine type's facts record
        assert after_cold["kcache_uploads_total"] == 2 * len(regions) + 2
        # One cold rank probed the CPU; the others used its record.
        assert sum(c["kcache"]["isa_probes_run"] > 0 for c in colds) == 1, [c["kcache"] for c in colds]
        for other in colds[1:]:
            assert other["losses"] == cold["losses"], differ("rank 1", other, "rank 0", cold)
            assert other["all_grads_sha256"] == cold["all_grads_sha256"]

        warm = run_job(tmp_path, cxx_wrapper, "warm", server.url, "--model", model)
        w = warm["kcache"]
        # Dynamo traced no frame at all (its step log and its counters).
        assert warm["dynamo_traced"] == [] and warm["stats"] == {}, warm["dynamo_traced"]
        assert w["precompiled_traces"] == 0 and w["misses"] == 0 and w["compiles"] == 0
        assert w["precompiled_blocks"] == cold["kcache"]["precompiled_blocks"]
        assert w["precompiled_fallbacks"] == w["precompiled_guard_failures"] == 0
        # A fresh container on a machine type the server knows: no ISA probe.
        assert w["isa_probes_run"] == 0 and w["machine_facts_hits"] == 1
        # Hits, counted by kcache, by its client and by the server.
        assert w["hits_server"] == len(regions) and w["client"]["server_hits"] >= 2 * len(regions)
        assert [r["status"] for r in warm["regions"]] == ["server"] * len(regions)
        after_warm = server.metrics()
        assert (after_warm["kcache_cache_hits_total"] - after_cold["kcache_cache_hits_total"]
                >= 2 * len(regions))  # an index and a variant per region
        # PyTorch: no FX-graph or AOTAutograd cache miss, nothing generated.
        assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
        assert warm["aot_autograd"].get("autograd_cache_miss", 0) == 0
        # The host compiler built none of the model's kernels, nor the ISA probes.
        assert warm["region_compiles"] == [] and warm["builds"] == [], warm["builds"][:3]
        # Not even a preprocessor pass or a precompiled header: PyTorch's
        # loader would build one in a fresh temp dir (the cold run did).
        assert any(".gch" in l or ".pch" in l for c in colds for l in c["compiler_runs"]), cold["compiler_runs"][:3]
        assert warm["compiler_runs"] == [], warm["compiler_runs"][:3]
        # Loading imported none of Inductor's compiler (lowering, IR,
        # scheduler, codegen); the cold run, which compiled, did.
        assert any("torch._inductor.lowering" in c["compiler_modules"] for c in colds)
        assert warm["compiler_modules"] == [], warm["compiler_modules"]
        # 50 AdamW steps: bit-identical losses and gradients.
        assert len(warm["losses"]) == 50
        assert warm["losses"] == cold["losses"], differ("warm", warm, "cold", cold)
        assert warm["all_grads_sha256"] == cold["all_grads_sha256"]

        # Against eager: Inductor reorders float math; after 50 steps the
        # losses agree to 1e-3 relative (documented tolerance, docs/compile.md).
        eager = run_job(tmp_path, cxx_wrapper, "eager", server.url, "--model", model, "--compiler", "eager")
        assert cold["losses"] == pytest.approx(eager["losses"], rel=1e-3)
    finally:
        server.stop()


@pytest.mark.slow
def test_kv_cache_blocks_are_variants_by_layer_index(tmp_path, cxx_wrapper):
    """With transformers' KV cache on, each GPT2Block writes its own cache
    layer: Dynamo's guards pin attn.layer_idx, so each index is a variant
    (one trace per variant cold, none warm), never a false hit.

    Over a minute: the cold job traces and compiles one variant per layer
    index."""
    server = ServerProcess(tmp_path)
    try:
        layers = 2  # two indices: two variants show it (three did, one trace more)
        cold = run_job(tmp_path, cxx_wrapper, "cold", server.url, "--kv-cache", layers=layers, steps=3)
        warm = run_job(tmp_path, cxx_wrapper, "warm", server.url, "--kv-cache", layers=layers, steps=3)
        others = len(cold["regions"]) - 1  # embeddings, dropout, final norm, head
        assert cold["kcache"]["precompiled_traces"] == others + layers
        assert warm["kcache"]["precompiled_traces"] == 0 and warm["dynamo_traced"] == []
        assert warm["kcache"]["hits_server"] == others + layers
        assert warm["kcache"]["precompiled_guard_failures"] == 0
        assert warm["losses"] == cold["losses"]
        assert warm["all_grads_sha256"] == cold["all_grads_sha256"]
    finally:
        server.stop()
