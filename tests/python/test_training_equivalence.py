"""Training through kcache computes what eager and plain compile_regions do:
50 AdamW steps (dropout 0) of a GPT-2 configuration with kcache cold, kcache
warm (a fresh process restoring every region), Accelerate's own
compile_regions and eager, and of a Llama configuration with kcache cold,
kcache warm and eager. (Llama's Accelerate run was dropped to keep the test
command in its time: a second model's plain compile_regions compiles every
region once more to show again what GPT-2's shows.) Each run is a process of its own, because
counters, caches and random streams are per process: about a minute of CPU
per compile on two cores, so this test cannot be much smaller."""

from __future__ import annotations

import json
import subprocess

import pytest

from kc_testing import PYTHON, REPO, python_env

STEPS = 50


def train(tmp_path, model, compiler, name):
    # One intra-op thread in every run: eager ops outside the regions (the
    # loss's reductions) then sum in the same order whatever else the
    # machine is doing.
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / f"node-{model}"),
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor-{model}-{name}"),
                     OMP_NUM_THREADS="1")
    out = subprocess.run([PYTHON, str(REPO / "examples" / "train_regional.py"), "--model", model,
                          "--layers", "2", "--steps", str(STEPS), "--compiler", compiler],
                         capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def differ(a_name, a, b_name, b):
    """A short account of two runs that should have matched."""
    first = next((i for i, (x, y) in enumerate(zip(a["losses"], b["losses"])) if x != y), -1)
    return (f"{a_name} and {b_name} differ from step {first}: "
            f"{a['losses'][first]!r} vs {b['losses'][first]!r}; "
            f"first-step gradients {'equal' if a['grad_sha256'] == b['grad_sha256'] else 'differ'}; "
            f"vec_isa {a['vec_isa']} vs {b['vec_isa']}; threads {a['threads']} vs {b['threads']}; "
            f"inductor {a['inductor']} vs {b['inductor']}")


@pytest.mark.slow
def test_fifty_steps_same_losses(tmp_path):
    """Over a minute: four processes, two of them full compiles (kcache cold
    and Accelerate's plain compile_regions); each must be a fresh
    process."""
    model = "gpt2"
    cold = train(tmp_path, model, "kcache", "cold")
    warm = train(tmp_path, model, "kcache", "warm")
    plain = train(tmp_path, model, "accelerate", "plain")
    eager = train(tmp_path, model, "eager", "eager")
    assert warm["kcache"]["misses"] == 0 and warm["kcache"]["hits_node"] >= 1
    assert len(cold["losses"]) == STEPS
    # Restored code is the very code compiled cold: bit-identical losses.
    assert warm["losses"] == cold["losses"], differ("warm", warm, "cold", cold)
    # Accelerate's own path compiles the same graphs in another process: on
    # this machine bit-identical too, but the project's CI once saw both
    # models drift from step 3 by ~1e-7 for a reason its truncated log hid
    # (docs/compile.md, "Numerics"), so this comparison allows 1e-5.
    assert plain["losses"][0] == cold["losses"][0], differ("accelerate", plain, "kcache cold", cold)
    assert plain["losses"] == pytest.approx(cold["losses"], rel=1e-5), differ("accelerate", plain, "kcache cold", cold)
    # Against eager: Inductor reorders float math; after 50 steps the losses
    # agree to 1e-3 relative (documented tolerance, docs/compile.md).
    assert cold["losses"] == pytest.approx(eager["losses"], rel=1e-3)


@pytest.mark.slow
def test_llama_fifty_steps_same_losses_warm_and_match_eager(tmp_path):
    """Over a minute: three processes, one a full compile of every region."""
    cold = train(tmp_path, "llama", "kcache", "cold")
    warm = train(tmp_path, "llama", "kcache", "warm")
    eager = train(tmp_path, "llama", "eager", "eager")
    assert cold["kcache"]["compiles"] >= 1 and len(cold["losses"]) == STEPS  # it really compiled
    assert warm["kcache"]["misses"] == 0 and warm["kcache"]["hits_node"] >= 1
    assert warm["losses"] == cold["losses"], differ("warm", warm, "cold", cold)
    assert cold["losses"] == pytest.approx(eager["losses"], rel=1e-3)
