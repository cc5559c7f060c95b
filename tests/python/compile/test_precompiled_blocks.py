"""Precompiled regions on blocks beyond GPT-2 and Llama (tests/models/blocks.py):
each kind either hits in a fresh process with outputs and gradients equal
to eager's, or falls back to the traced path with its stated reason; and a
mutation suite: every change that changes the graph misses, other weights
and other block indices hit."""

from __future__ import annotations

import json

import pytest

from kc_testing import PYTHON, REPO, python_env
from harness.jobs import run_job

JOB = str(REPO / "tests" / "python" / "compile" / "precompiled_job.py")

# Kinds Dynamo cannot capture whole: they must fall back, with this reason.
FALLS_BACK = {"graph_break": "graph_break()"}
TOL = 1e-5  # Inductor reorders float math; eager comparison only


def run(tmp_path, name, *args, **extra_env):
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), KCACHE_PRECOMPILED="1",
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{name}"),
                     PYTHONPATH=str(REPO / "tests"), **extra_env)
    out = run_job([PYTHON, JOB, *args], timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.mark.slow
def test_block_zoo_hits_or_falls_back_with_its_reason(tmp_path):
    """Over a minute: eight block kinds compiled cold in one process, then warm
    in another."""
    cold, _ = run(tmp_path, "cold", "zoo")
    warm, warm_log = run(tmp_path, "warm", "zoo")  # a fresh process, fresh Inductor dir
    assert set(cold) == set(warm) and len(cold) == 8
    for kind, w in warm.items():
        c = cold[kind]
        assert w["out_diff"] <= TOL and w["grad_diff"] <= TOL, (kind, w)
        assert w["grads"] > 0, kind  # the backward really ran through the region
        if kind in FALLS_BACK:
            region = c["regions"][0]
            assert region["path"] == "traced" and FALLS_BACK[kind] in region["reason"], (kind, c)
            assert w["delta"]["precompiled_blocks"] == 0 and w["delta"]["precompiled_fallbacks"] == 1
            assert f"is not precompiled ({w['regions'][0]['reason']}" in warm_log
            continue
        # Positive control: the cold run traced the region once for all 3 blocks.
        assert c["delta"]["precompiled_traces"] == 1 and c["delta"]["misses"] == 1, (kind, c)
        assert [r["path"] for r in c["regions"]] == ["precompiled"], (kind, c)
        # Warm: every block precompiled, loaded from the node tier, no trace.
        assert w["delta"]["precompiled_traces"] == 0 and w["delta"]["hits_node"] == 1, (kind, w)
        assert w["delta"]["precompiled_blocks"] == 3 and w["delta"]["misses"] == 0, (kind, w)
        assert w["delta"]["precompiled_guard_failures"] == 0, (kind, w)
        # The restored code is the code compiled cold: identical numbers.
        assert w["out_diff"] == c["out_diff"] and w["grad_diff"] == c["grad_diff"], kind


@pytest.mark.slow
def test_mutations_miss_and_other_weights_or_indices_hit(tmp_path):
    """Over a minute: every mutation case is a compile of its own."""
    result, _ = run(tmp_path, "mutations", "mutations")
    hits = {"other_weights", "other_block_indices", "config_other_weights_and_indices"}
    bases = {"base", "config_base"}
    for name, r in result.items():
        d = r["delta"]
        assert r["out_diff"] <= TOL and r["grad_diff"] <= TOL, (name, r)
        assert d["precompiled_blocks"] == 2 and d["precompiled_fallbacks"] == 0, (name, d)
        if name in hits:
            assert d["precompiled_traces"] == 0 and d["misses"] == 0 and d["hits_node"] == 1, (name, d)
        else:  # the base compiles, and every mutation of it must miss
            assert d["precompiled_traces"] == 1 and d["misses"] == 1 and d["hits_node"] == 0, (name, d)
    assert set(result) - hits - bases == {
        "eps", "activation", "dtype", "training_flag", "buffer_shape",
        "config_value_read_in_forward", "config_flag_read_in_forward"}


MODES_JOB = r'''
import json, sys, torch, kcache
from models import blocks
out = {}
for name, kwargs in json.loads(sys.argv[1]).items():
    torch._dynamo.reset()  # each mode starts as a fresh process's first compile would
    before, seen = kcache.stats(), len(kcache.api.region_outcomes())
    torch.manual_seed(0)
    model = blocks.Stack([blocks.WithBuffer() for _ in range(3)])
    compiled = kcache.compile_regions(model, **kwargs)
    outs = []
    for batch in ([2] if not kwargs.get("dynamic") else [2, 5]):
        x = torch.randn(batch, 8, blocks.DIM, generator=torch.Generator().manual_seed(batch)).requires_grad_()
        y = compiled(x)
        y.square().mean().backward()
        outs.append(y.detach().flatten().tolist())
    after = kcache.stats()
    out[name] = {"outs": outs, "kcache": {k: after[k] - before[k] for k in
                                          ("precompiled_traces", "misses", "hits_node", "precompiled_blocks")},
                 "regions": kcache.api.region_outcomes()[seen:]}
print(json.dumps(out))
'''

MODES = {"max-autotune-no-cudagraphs": {"mode": "max-autotune-no-cudagraphs"},
         "reduce-overhead": {"mode": "reduce-overhead"}, "dynamic": {"dynamic": True}}


@pytest.mark.slow
def test_modes_and_dynamic_take_the_precompiled_path(tmp_path):
    """One cold process compiling each mode in turn (Dynamo reset between
    them), one warm process restoring them all (a cold and a warm process
    per mode, six in all, until the thirteenth session)."""
    def job(phase):
        env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), KCACHE_PRECOMPILED="1", PYTHONPATH=str(REPO / "tests"),
                         TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{phase}"))
        out = run_job([PYTHON, "-c", "import kcache.api\n" + MODES_JOB, json.dumps(MODES)], timeout=900, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    colds, warms = job("cold"), job("warm")
    assert set(colds) == set(warms) == set(MODES)
    for name in MODES:
        cold, warm = colds[name], warms[name]
        assert [r["path"] for r in cold["regions"]] == ["precompiled"], (name, cold["regions"])
        assert cold["kcache"]["precompiled_traces"] == 1 and cold["kcache"]["misses"] >= 1, (name, cold)
        assert warm["kcache"]["precompiled_traces"] == 0 and warm["kcache"]["misses"] == 0, (name, warm)
        assert warm["kcache"]["hits_node"] >= 1 and warm["kcache"]["precompiled_blocks"] >= 3, (name, warm)
        assert warm["outs"] == cold["outs"], name
