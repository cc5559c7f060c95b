"""The end of a job through kcache saves like a job through Accelerate
(dropin_save_job.py): transformers' Trainer (tiny GPT-2 and Llama, two
steps, kcache through install()), every save path loaded into a model that
was never compiled with no missing, unexpected or mismatched keys and equal
logits, generate() after training, a checkpoint resumed in a warm process,
and a PEFT LoRA adapter with the keys PEFT writes without compile."""

from __future__ import annotations

import json
import math

import pytest

from kc_testing import PYTHON, python_env
from harness.jobs import run_job

JOB = __import__("pathlib").Path(__file__).parent / "dropin_save_job.py"


def job(tmp_path, what: str, kind: str, out) -> dict:
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION="1",
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"ind-{what}"), TOKENIZERS_PARALLELISM="false")
    r = run_job([PYTHON, str(JOB), what, "--kind", kind, "--out", str(out)], timeout=1200, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_went_through_kcache(report: dict) -> None:
    # Positive control: kcache's precompiled blocks ran (its counters) and
    # Accelerate saw the model as compiled.
    assert report["compiled"]["has_compiled_regions"], report["compiled"]
    assert report["compiled"]["compiled_blocks"], report["compiled"]
    assert report["kcache"]["precompiled_blocks"] >= 2, report["kcache"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_trainer_saves_a_plain_model(tmp_path, kind):
    """Minutes: a cold Trainer job (every region compiled), then a warm one
    resuming its first checkpoint (GPT-2)."""
    out = tmp_path / "run"
    r = job(tmp_path, "trainer", kind, out)
    assert_went_through_kcache(r)
    assert r["kcache"]["compiles"] >= 1  # cold: the compiler ran
    assert r["unwrapped_is_compiled"] is False
    no_keys = {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}
    for name, s in r["saves"].items():
        if "loading_info" in s:
            assert {k: s["loading_info"].get(k, []) for k in no_keys} == no_keys, (name, s)
        if "strict_load" in s:
            assert s["strict_load"] == {"missing": [], "unexpected": []}, (name, s)
        assert s["same_keys_as_plain"] if "same_keys_as_plain" in s else True, (name, s)
        if "max_logit_diff" in s:
            assert s["max_logit_diff"] == 0.0, (name, s)
    assert set(r["saves"]) == {"trainer.save_model", "accelerator.save_model", "unwrap_model+save_pretrained",
                               "checkpoint-2", "accelerator.get_state_dict",
                               "torch.save(unwrap_model().state_dict())"}
    assert r["generate_equal"]
    assert r["load_state_logit_diff"] == 0.0
    if kind != "gpt2":
        return
    w = job(tmp_path, "resume", kind, out)
    assert_went_through_kcache(w)
    # Warm: every region loaded (hits), nothing compiled, no Dynamo trace.
    assert w["kcache"]["compiles"] == 0 and w["kcache"]["precompiled_traces"] == 0, w["kcache"]
    assert w["kcache"]["hits_node"] >= 1
    assert w["final_state"].keys() == r["final_state"].keys()
    for k, v in r["final_state"].items():
        assert math.isclose(w["final_state"][k], v, rel_tol=1e-4, abs_tol=1e-4), k


@pytest.mark.slow
def test_peft_lora_adapter_saves_plain_keys(tmp_path):
    r = job(tmp_path, "peft", "gpt2", tmp_path / "peft")
    assert_went_through_kcache(r)
    assert r["adapter_same_keys"], r["adapter_keys"]
    assert r["max_logit_diff"] < 1e-5
