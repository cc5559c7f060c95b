"""A tiny compile job run in a fresh process, for restore tests."""

from __future__ import annotations

import json
import shutil

import pytest

from kc_testing import PYTHON, python_env
from harness.jobs import run_job

JOB = r'''
import json, sys, torch, kcache
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))
x = torch.randn(3, 8)
with torch.no_grad():
    eager = m(x)
    out = kcache.compile(m)(x)
from kcache import _torch_adaptor as adaptor
print(json.dumps({"max_diff": (out - eager).abs().max().item(), "kcache": kcache.stats(),
                  "inductor": adaptor.counters().get("inductor", {})}))
'''


def run(tmp_path, name, **env):
    env = python_env(KCACHE_LOCAL_DIR=str(tmp_path / "node"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"ind-{name}"),
                     **env)
    out = run_job([PYTHON, "-c", JOB], timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tiny_cold(tmp_path_factory):
    """One cold run of JOB for a module's tests: (its directory, its
    result). Each test takes a copy of the node tier with `cold_copy`."""
    where = tmp_path_factory.mktemp("tiny-cold")
    return where, run(where, "cold")


def cold_copy(tiny_cold, tmp_path) -> dict:
    """The shared cold run's node tier copied into tmp_path (as if this test
    had run it); returns the cold run's result."""
    where, result = tiny_cold
    shutil.copytree(where / "node", tmp_path / "node", symlinks=True)
    return result


def stored_bundles(tmp_path):
    """The region bundles on the node (not kcache's shared ISA-probe entry
    nor its machine-facts record)."""
    from kcache import _core

    out = []
    for p in (tmp_path / "node" / "objects").rglob("*"):
        if p.is_file():
            manifest = json.loads(_core.inspect_bundle(p.read_bytes())[0])
            if not manifest["label"].startswith(("inductor-isa-probes/", "machine-facts/")):
                out.append(p)
    return out
