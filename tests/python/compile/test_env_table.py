"""Every environment variable torch's compile path reads is classified."""

from __future__ import annotations

import json

from kc_testing import PYTHON, python_env
from kcache.keys import env_table
from harness.jobs import run_job

RECORDER = r'''
import json, os, sys
reads = set()
base = type(os.environ)
class Recording(base):
    def __getitem__(self, k):
        reads.add(k); return super().__getitem__(k)
    def __contains__(self, k):
        reads.add(k); return super().__contains__(k)
    def get(self, k, d=None):
        reads.add(k); return super().get(k, d)
e = os.environ
os.environ = Recording(e._data, e.encodekey, e.decodekey, e.encodevalue, e.decodevalue)
_getenv = os.getenv
os.getenv = lambda k, d=None: (reads.add(k), _getenv(k, d))[1]
import torch
import kcache
model = kcache.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()))
x = torch.randn(4, 8, requires_grad=True)
model(x).sum().backward()
print(json.dumps(sorted(k for k in reads if isinstance(k, str))))
'''


def hermetic_env(**extra: str) -> dict[str, str]:
    """Only what a compile needs: torch copies the whole environment (which
    reads every name), so the runner's own variables would otherwise count
    as reads (found when CI's CCACHE_* settings appeared as undeclared)."""
    env = {k: v for k, v in python_env().items()
           if k in ("PATH", "HOME", "LANG", "TMPDIR", "PYTHONFAULTHANDLER")}
    env.update(extra)
    return env


def test_every_variable_read_by_a_compile_is_declared(tmp_path):
    env = hermetic_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "ind"), KCACHE_LOCAL_DIR=str(tmp_path / "node"))
    out = run_job([PYTHON, "-c", RECORDER], timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    names = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(names) > 100  # the recorder really saw torch's reads
    undeclared = [n for n in names if env_table.classify(n) is None]
    assert undeclared == [], f"declare these in compile/kcache/keys/env_table.py: {undeclared}"


def test_classification_rules():
    assert env_table.classify("OMP_NUM_THREADS") == "relevant"
    assert env_table.classify("TORCHINDUCTOR_CACHE_DIR") == "neutral"
    assert env_table.classify("TORCHINDUCTOR_SOMETHING_NEW") == "relevant"
    assert env_table.classify("INDUCTOR_ORIG_FX_GRAPH") == "neutral"
    assert env_table.classify("CUDA_VISIBLE_DEVICES") == "neutral"
    assert env_table.classify("KCACHE_URL") == "neutral"
    assert env_table.classify("SOME_RANDOM_VAR") is None
    assert env_table.classify("CCACHE_BASEDIR") == "neutral"
    # torch sets this one itself, to a pointer value (seen splitting keys under autocast)
    assert env_table.classify("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR") == "neutral"
    field = json.loads(env_table.env_field({"OMP_NUM_THREADS": "4", "HOME": "/x", "TORCH_LOGS": "+dynamo"}))
    assert field == {"OMP_NUM_THREADS": "4"}
