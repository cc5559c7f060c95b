"""A job's compiler settings in the key and in the compile worker
(docs/keys.md, "Compiler configuration"), with real jobs against a real
kcache-server: an Inductor custom pass (tests/models/passes.py, which
changes what a compiled block computes) and the float32 matmul precision.

- Wait mode: a cold job with the pass compiles under it (its losses leave
  eager's: the positive control), a warm one loads its region, and a job
  WITHOUT the pass against the same server computes another key: it loads
  nothing, compiles its own region and matches eager.
- Background mode: a cold job with the pass and matmul precision "high"
  runs eagerly, then switches to the region its compile worker built; the
  worker computed the rank's key (no refusal: the pass and the precision
  reached it). A restart loads that region at its first step and traces
  nothing, and every step equals a twin compiled by stock torch.compile
  under the same settings.
"""

from __future__ import annotations

import json

import pytest

from test_cold_background import assert_close_to_eager, entry_traces, finish, served, start

MODEL = ("--model", "gpt2", "--layers", "2", "--hidden", "32")
PASS = ("--pass-factor", "1.5")


def hits(k: dict) -> int:
    return k["hits_node"] + k["hits_server"]


def assert_pass_in_effect(out: dict, steps) -> None:
    for i in steps:
        assert abs(out["losses"][i] - out["eager_losses"][i]) > 1e-3, \
            f"step {i}: {out['losses'][i]!r} is eager's: the pass did not run"


@pytest.mark.slow
def test_a_custom_pass_is_in_the_key_in_wait_mode(tmp_path, cxx_wrapper):
    with served(tmp_path) as srv:
        cold = finish(start(tmp_path, cxx_wrapper, "cold", srv.url, *MODEL, *PASS, "--steps", "3",
                            cold_start="wait"), tmp_path, "cold")
        assert cold["compiled_steps"] == [0, 1, 2] and cold["builds"]  # compiled here, under the pass
        assert hits(cold["kcache"]) == 0
        assert_pass_in_effect(cold, [0])

        warm = finish(start(tmp_path, cxx_wrapper, "warm", srv.url, *MODEL, *PASS, "--steps", "3",
                            cold_start="wait"), tmp_path, "warm")
        assert hits(warm["kcache"]) >= 1 and warm["kcache"]["misses"] == 0 and warm["builds"] == []
        assert warm["losses"] == pytest.approx(cold["losses"], abs=1e-6)

        stored = srv.metrics()["kcache_uploads_total"]
        plain = finish(start(tmp_path, cxx_wrapper, "plain", srv.url, *MODEL, "--steps", "3",
                             cold_start="wait"), tmp_path, "plain")
        assert hits(plain["kcache"]) == 0, "a job without the pass loaded the pass's region"
        assert plain["builds"] and srv.metrics()["kcache_uploads_total"] > stored  # its own region
        assert_close_to_eager(plain)


@pytest.mark.slow
def test_a_custom_pass_and_matmul_precision_reach_the_compile_worker(tmp_path, cxx_wrapper):
    settings = (*MODEL, *PASS, "--matmul-precision", "high")
    with served(tmp_path) as srv:
        cold = finish(start(tmp_path, cxx_wrapper, "cold", srv.url, *settings, "--steps", "2",
                            "--until-switched"), tmp_path, "cold")
        k = cold["kcache"]
        assert cold["mode"] == "background" and 0 not in cold["compiled_steps"]
        assert k["background_jobs"] >= 1 and k["regions_switched"] == k["background_jobs"]
        # The worker keyed the block as the rank did: it had the pass and the precision.
        assert k["background_refusals"] == 0 and k["background_faults"] == 0
        assert k["background_compile_seconds"] > 0 and cold["builds"]  # the worker compiled
        assert entry_traces(cold) == []
        assert cold["eager_steps"] and cold["eager_steps"][0] == 0
        for i in cold["eager_steps"]:  # every block eager while the worker compiled: eager's losses
            assert abs(cold["losses"][i] - cold["eager_losses"][i]) <= 1e-4, i
        # (Its compiled steps come thousands of steps in, where both copies' losses are near 0: the
        # pass shows in the restart, which starts from the same weights on the worker's region.)

        restart = finish(start(tmp_path, cxx_wrapper, "restart", srv.url, *settings, "--steps", "3",
                               "--stock-twin"), tmp_path, "restart")
        r = restart["kcache"]
        assert restart["compiled_steps"] == [0, 1, 2] and r["eager_block_calls"] == 0
        assert hits(r) >= 1 and r["misses"] == 0 and r["background_jobs"] == 0
        assert entry_traces(restart) == []  # kcache's blocks loaded; only the twin traced
        # Every step equals stock torch.compile under the same pass and precision...
        assert_close_to_eager(restart)
        # ...which is not eager (same weights and data at step 0 as the cold job's eager step).
        assert abs(restart["losses"][0] - cold["eager_losses"][0]) > 1e-3


_UNKEYABLE_JOB = r'''
import json, sys, torch, kcache
sys.path.insert(0, sys.argv[1])
from models.passes import NoUuid
if sys.argv[2] == "pass":
    torch._inductor.config.post_grad_custom_post_pass = NoUuid()
torch.manual_seed(0)
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
    def forward(self, x):
        return torch.nn.functional.gelu(self.lin(x)) + x
class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))
    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x
m = Stack()
x = torch.randn(3, 8)
with torch.no_grad():
    eager = m(x)
    out = kcache.compile_regions(m)(x)
print(json.dumps({"max_diff": (out - eager).abs().max().item(), "kcache": kcache.stats()}))
'''


def test_a_pass_without_uuid_is_neither_stored_nor_fetched(tmp_path):
    """As PyTorch's FX-graph cache bypasses itself for such a pass: the
    regions compile as stock PyTorch would, counted in `bypassed`, and
    nothing reaches the node tier; the same job without the pass (the
    positive control) stores its region."""
    from harness.jobs import run_job
    from kc_testing import PYTHON, REPO, python_env
    from tiny_job import stored_bundles

    results = {}
    for name in ("pass", "plain"):
        env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / name / "node"), KCACHE_COLD_START="wait",
                         TORCHINDUCTOR_CACHE_DIR=str(tmp_path / name / "inductor"))
        out = run_job([PYTHON, "-c", _UNKEYABLE_JOB, str(REPO / "tests"), name], timeout=600, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
        results[name]["stored"] = len(stored_bundles(tmp_path / name))
        results[name]["stderr"] = out.stderr
    bypassed, plain = results["pass"], results["plain"]
    assert bypassed["kcache"]["bypassed"] >= 1 and bypassed["stored"] == 0, bypassed["kcache"]
    assert bypassed["stderr"].count("a pass without uuid()") == 1  # said once
    assert bypassed["max_diff"] <= 1e-5
    assert plain["kcache"]["bypassed"] == 0 and plain["stored"] >= 1
