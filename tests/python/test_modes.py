"""Each compile mode, and dynamic=True, round-trips through kcache on a tiny
model: cold compile, warm restore with no FX-graph misses, equal outputs,
and a distinct key per mode."""

from __future__ import annotations

import json
import subprocess

import pytest

from kc_testing import PYTHON, python_env

JOB = r'''
import json, sys, torch, kcache
kwargs = json.loads(sys.argv[1])
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))
compiled = kcache.compile(m, **kwargs)
outs = []
with torch.no_grad():
    for batch in ([3] if not kwargs.get("dynamic") else [3, 5]):
        x = torch.randn(batch, 16, generator=torch.Generator().manual_seed(batch))
        outs.append(compiled(x).tolist())
from kcache import _torch_adaptor as adaptor
print(json.dumps({"outs": outs, "inductor": adaptor.counters().get("inductor", {}),
                  "kcache": kcache.stats(), "keys": kcache.api.last_keys()}))
'''


def run(tmp_path, name, kwargs):
    out = subprocess.run([PYTHON, "-c", JOB, json.dumps(kwargs)], capture_output=True, text=True,
                         timeout=600, env=python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"),
                                                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / name)))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


MODES = {"default": {}, "reduce-overhead": {"mode": "reduce-overhead"},
         "max-autotune": {"mode": "max-autotune"}, "dynamic": {"dynamic": True}}


@pytest.mark.slow
def test_modes_round_trip_with_distinct_keys(tmp_path):
    """Over a minute: four modes, each compiled cold and restored warm in
    processes of their own (counters and caches are per process)."""
    keys = {}
    for name, kwargs in MODES.items():
        cold = run(tmp_path, f"{name}-cold", kwargs)
        warm = run(tmp_path, f"{name}-warm", kwargs)
        assert cold["kcache"]["compiles"] >= 1, name
        assert warm["kcache"]["misses"] == 0 and warm["kcache"]["hits_node"] >= 1, name
        assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0, name
        # Positive control: Inductor did use its cache in this mode (a mode
        # that bypassed it would show no misses either).
        assert warm["inductor"].get("fxgraph_cache_bypass", 0) == 0, name
        assert warm["inductor"].get("fxgraph_cache_hit", 0) >= cold["inductor"].get("fxgraph_cache_miss", 0) > 0, name
        flat = lambda outs: [v for batch in outs for row in batch for v in row]  # noqa: E731
        assert flat(warm["outs"]) == pytest.approx(flat(cold["outs"]), rel=1e-6), name
        assert warm["keys"] == cold["keys"], name
        keys[name] = tuple(cold["keys"])
    assert len(set(keys.values())) == len(keys), keys
