"""A job on a torch outside kcache's window (issue 29; docs/torch-support.md)
trains, with the stated path and the stated message said once: the traced
path when its facts hold, PyTorch's own torch.compile when they do not.
The version string is patched in the job (other_torch_job.py); everything
else is this machine's real torch, compiling a 2-block GPT-2 for real.
Each test can take over a minute on a loaded 2-core machine: a cold
compile of the smallest GPT-2 the example builds, which is the proof that
the job trains (the first test also trains it eagerly to compare losses)."""

from __future__ import annotations

import json

import pytest

from kc_testing import PYTHON, REPO, python_env
from harness.jobs import run_job

TINY = ["--layers", "2", "--steps", "3"]


def job(tmp_path, name: str, *extra: str) -> tuple[dict, str]:
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / f"node-{name}"), KCACHE_PRECOMPILED="1",
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{name}"), OMP_NUM_THREADS="1")
    out = run_job([PYTHON, str(REPO / "tests" / "python" / "compile" / "other_torch_job.py"), *TINY, *extra],
                  timeout=600, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.mark.slow
def test_outside_the_window_the_job_trains_on_the_traced_path_and_says_so(tmp_path):
    result, stderr = job(tmp_path, "old", "--as-version", "2.12.0")
    said = [l for l in stderr.splitlines() if "outside the supported releases" in l]
    assert len(said) == 1, stderr[-3000:]
    assert "torch 2.12.0 is outside the supported releases (2.13, 2.14, 2.15): precompiled regions are off" \
        in said[0]
    # The traced path: kcache's regions, none precompiled, compiled for real
    # (Dynamo traced the blocks' forward, kcache counted compiles).
    assert result["regions"] and {r["path"] for r in result["regions"]} == {"traced"}, result["regions"]
    assert result["dynamo_traced"] and not any("precompiled/entries.py" in t for t in result["dynamo_traced"])
    assert all(r["status"] == "compiled" for r in result["regions"])
    eager, _ = job(tmp_path, "eager", "--as-version", "2.12.0", "--compiler", "eager")
    assert result["losses"] == pytest.approx(eager["losses"], rel=1e-4)


@pytest.mark.slow
def test_without_the_traced_paths_facts_torch_compile_runs_untouched(tmp_path):
    result, stderr = job(tmp_path, "stock", "--as-version", "2.12.0", "--without-traced-probe")
    said = [l for l in stderr.splitlines() if "kcache is off and torch.compile runs unchanged" in l]
    assert len(said) == 1 and "a probe this test makes fail" in said[0], stderr[-3000:]
    # PyTorch's own compile ran (Dynamo traced), kcache stored nothing.
    assert result["dynamo_traced"] and result["regions"] == []
