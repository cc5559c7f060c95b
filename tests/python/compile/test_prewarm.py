"""python -m kcache.prewarm against a real kcache-server: it compiles and
uploads every region of a small GPT-2, and then a fresh training job (empty
node tier, empty Inductor cache) starts warm: every region from the server,
no FX-graph cache miss, no compile."""

from __future__ import annotations

import json
import subprocess

import pytest

from kc_testing import PYTHON, REPO, ServerProcess, python_env
from harness.jobs import run_job

SIZE = ["--layers", "2", "--hidden", "32"]


def fresh_env(tmp_path, name, **extra):
    # KCACHE_COLD_START as users leave it (unset: background with a server):
    # prewarm must compile and store in its own process all the same.
    return python_env(KCACHE_LOCAL_DIR=str(tmp_path / f"node-{name}"), KCACHE_PRECOMPILED="1",
                      TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{name}"),
                      **{"KCACHE_COLD_START": "", **extra})


def prewarm(tmp_path, name, *args):
    out = run_job([PYTHON, "-m", "kcache.prewarm", "--model", "gpt2", *SIZE, *args],
                  timeout=900, env=fresh_env(tmp_path, name))
    return out, json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else None


def test_build_model_is_small_and_configurable():
    from kcache.tools.prewarm import build_model

    m = build_model("llama", 3, 32, 4, "bfloat16")
    assert len(m.model.layers) == 3 and m.config.num_attention_heads == 4
    assert next(m.parameters()).dtype.is_floating_point and str(next(m.parameters()).dtype) == "torch.bfloat16"
    with pytest.raises(ValueError):
        build_model("bert", 1, 32, 2)


def test_no_import_cycle_between_the_prewarm_modules():
    # aoti_prewarm builds the same models without importing prewarm (and
    # prewarm imports aoti_prewarm only for --aoti).
    code = ("import sys, kcache.tools.aoti_prewarm; assert 'kcache.tools.prewarm' not in sys.modules, "
            "'aoti_prewarm imported prewarm'; import kcache.tools.model_zoo as z; "
            "assert kcache.tools.aoti_prewarm.seeded_model.__module__ == 'kcache.tools.aoti_prewarm'")
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=python_env())
    assert out.returncode == 0, out.stderr[-2000:]


def test_refuses_a_nonzero_cuda_index():
    out = run_job([PYTHON, "-m", "kcache.prewarm", "--device", "cuda:1", *SIZE], timeout=300, env=python_env())
    assert out.returncode != 0 and "cuda:0 only" in out.stderr


@pytest.mark.slow
def test_unreachable_server_is_a_failure(tmp_path):
    out, report = prewarm(tmp_path, "down", "--infer", "--server", "http://127.0.0.1:9")
    assert out.returncode == 1, out.stderr[-2000:]
    assert "not uploaded" in out.stderr
    assert {r["status"] for r in report["regions"]} == {"local"}


@pytest.mark.slow
@pytest.mark.fresh_node  # prewarm shares Inductor's ISA probes too
def test_prewarm_then_a_fresh_job_starts_warm(tmp_path):
    """Over a minute: a prewarm process compiles every region, then fresh jobs
    start from the server."""
    server = ServerProcess(tmp_path)
    try:
        out, report = prewarm(tmp_path, "prewarm", "--train", "--server", server.url)
        assert out.returncode == 0, out.stderr[-3000:]
        statuses = {r["status"] for r in report["regions"]}
        assert statuses == {"compiled"}, report["regions"]
        # A precompiled region uploads its index and each variant it traced;
        # + the ISA probes.
        assert {r.get("path") for r in report["regions"]} == {"precompiled"}
        variants = report["kcache"]["precompiled_traces"]
        assert variants == len(report["regions"])  # no KV cache: one variant per region
        # + the ISA probes entry and the machine-facts record
        assert report["kcache"]["client"]["uploads"] == len(report["regions"]) + variants + 2
        for line in out.stdout.splitlines()[:-1]:  # one line per region: key, target, status
            assert report["target"] in line and "compiled" in line

        # A second prewarm in a fresh process compiles nothing.
        out2, again = prewarm(tmp_path, "again", "--train", "--server", server.url)
        assert out2.returncode == 0, out2.stderr[-3000:]
        assert {r["status"] for r in again["regions"]} == {"server"}
        assert [r["key"] for r in again["regions"]] == [r["key"] for r in report["regions"]]
        assert again["kcache"]["compiles"] == 0
        assert again["inductor"].get("fxgraph_cache_miss", 0) == 0

        # The cluster's first job (same model, shapes and mode) starts warm.
        job = run_job([PYTHON, str(REPO / "examples/train_regional.py"), *SIZE, "--steps", "1"],
                      timeout=900, env=fresh_env(tmp_path, "job", KCACHE_URL=server.url))
        assert job.returncode == 0, job.stderr[-3000:]
        result = json.loads(job.stdout.strip().splitlines()[-1])
        assert result["kcache"]["compiles"] == 0 and result["kcache"]["misses"] == 0
        assert result["kcache"]["hits_server"] == len(report["regions"])
        assert result["inductor"].get("fxgraph_cache_miss", 0) == 0
        # Precompiled regions: the job ran prewarm's artifacts, traced nothing.
        assert result["kcache"]["precompiled_blocks"] > 0 and result["dynamo_traced"] == []
    finally:
        server.stop()
