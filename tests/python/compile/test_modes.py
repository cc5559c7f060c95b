"""Each compile mode, and dynamic=True, round-trips through kcache on a tiny
model: cold compile, warm restore with no FX-graph misses, equal outputs,
and a distinct key per mode."""

from __future__ import annotations

import json

import pytest

from kc_testing import PYTHON, python_env
from harness.jobs import run_job

JOB = r'''
import json, sys, torch, kcache
from kcache import _torch_adaptor as adaptor
results = {}
for name, kwargs in json.loads(sys.argv[1]).items():
    torch._dynamo.reset()  # each mode starts as a fresh process's first compile would
    before_ind = adaptor.counters().get("inductor", {})
    before_kc, seen = kcache.stats(), len(kcache.api.last_keys())
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))
    compiled = kcache.compile(m, **kwargs)
    outs = []
    with torch.no_grad():
        for batch in ([3] if not kwargs.get("dynamic") else [3, 5]):
            x = torch.randn(batch, 16, generator=torch.Generator().manual_seed(batch))
            outs.append(compiled(x).tolist())
    ind, kc = adaptor.counters().get("inductor", {}), kcache.stats()
    results[name] = {"outs": outs, "keys": kcache.api.last_keys()[seen:],
                     "inductor": {k: ind.get(k, 0) - before_ind.get(k, 0) for k in ind},
                     "kcache": {k: kc[k] - before_kc[k] for k in ("compiles", "misses", "hits_node")}}
print(json.dumps(results))
'''


def run(tmp_path, name, modes):
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / name))
    out = run_job([PYTHON, "-c", JOB, json.dumps(modes)], timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


MODES = {"default": {}, "reduce-overhead": {"mode": "reduce-overhead"},
         "max-autotune": {"mode": "max-autotune"}, "dynamic": {"dynamic": True}}


@pytest.mark.slow
def test_modes_round_trip_with_distinct_keys(tmp_path):
    """Four modes compiled cold in one process, then restored warm in another
    (a fresh Inductor dir; counters are compared per mode)."""
    cold_all, warm_all = run(tmp_path, "cold", MODES), run(tmp_path, "warm", MODES)
    keys = {}
    for name in MODES:
        cold, warm = cold_all[name], warm_all[name]
        assert cold["kcache"]["compiles"] >= 1, name
        assert warm["kcache"]["misses"] == 0 and warm["kcache"]["hits_node"] >= 1, name
        assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0, name
        # Positive control: Inductor did use its cache in this mode (a mode
        # that bypassed it would show no misses either).
        assert warm["inductor"].get("fxgraph_cache_bypass", 0) == 0, name
        assert warm["inductor"].get("fxgraph_cache_hit", 0) >= cold["inductor"].get("fxgraph_cache_miss", 0) > 0, name
        flat = lambda outs: [v for batch in outs for row in batch for v in row]  # noqa: E731
        assert flat(warm["outs"]) == pytest.approx(flat(cold["outs"]), rel=1e-6), name
        assert warm["keys"] == cold["keys"] and cold["keys"], name
        keys[name] = tuple(cold["keys"])
    assert len(set(keys.values())) == len(keys), keys
