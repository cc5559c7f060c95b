"""kcache evict and rm: each policy removes exactly what its dry run listed."""

from __future__ import annotations

import os
import time

import pytest

from cli_harness import (
    EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, cli_json, make_artifact, requires_binaries, run_cli,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries

CPU = "GPT2Block/cpu:avx512/f32/default/train"
GPU = "GPT2Block/cuda:sm_90/bf16/max-autotune/infer"
MLP = "GPT2MLP/cpu:avx512/f32/reduce-overhead/train"


def populate(server):
    """Four entries, put in this order (so least recently used first)."""
    arts = []
    for label, tc in ((CPU, None), (GPU, '{"torch": "2.12.0"}'), (MLP, None), (CPU, None)):
        extra = {"toolchain": tc} if tc else {}
        arts.append(server.put(make_artifact(label, payload=os.urandom(3000), **extra)))
        time.sleep(0.005)  # distinct last-access times
    return arts


def budget(arts, keep):
    return str(sum(len(a.bundle) for a in keep))


# name: (arguments given the artifacts, the artifacts that must go)
POLICIES = {
    "target": (lambda a: ["--target", "cuda:sm_90"], lambda a: [a[1]]),
    "mode": (lambda a: ["--mode", "reduce-overhead"], lambda a: [a[2]]),
    "label-prefix": (lambda a: ["--label-prefix", "GPT2Block/cpu"], lambda a: [a[0], a[3]]),
    "toolchain": (lambda a: ["--toolchain", "torch-2.12.0"], lambda a: [a[1]]),
    # LRU until usage ≤ the budget: the two least recently used go.
    "max-bytes": (lambda a: ["--max-bytes", budget(a, a[2:])], lambda a: [a[0], a[1]]),
    # Among matching entries only: the least recently used CPU one goes.
    "max-bytes+target": (lambda a: ["--max-bytes", budget(a, a[1:]), "--target", "cpu:avx512"], lambda a: [a[0]]),
    "max-bytes-units": (lambda a: ["--max-bytes", "1G"], lambda a: []),
}


@pytest.mark.parametrize("name", list(POLICIES))
def test_policy_removes_exactly_its_dry_run(server, name):
    arts = populate(server)
    make_args, expected = POLICIES[name]
    args = make_args(arts)
    before = server.keys()
    dry = cli_json("evict", *args, "--dry-run", server=server)
    assert dry["dry_run"] is True
    listed = set(dry["keys"])
    assert listed == {a.key for a in expected(arts)}
    assert {e["label"] for e in dry["entries"]} == {a.label for a in expected(arts)}
    assert server.keys() == before  # a dry run removes nothing
    real = cli_json("evict", *args, server=server)
    assert set(real["keys"]) == listed and real["dry_run"] is False
    assert server.keys() == before - listed


def test_older_than(server):
    arts = populate(server)
    # The untouched entries are older than 3 s (ages only grow); the touched
    # one stays younger than 3 s through both CLI runs: seconds of margin,
    # not the 1 s two runs on a loaded machine could use up.
    time.sleep(3.5)
    server.request("GET", f"/v1/artifacts/{arts[2].key}")  # touched: stays
    r = run_cli("evict", "--older-than", "3s", "--dry-run", server=server)
    assert r.returncode == EXIT_OK, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["KEY", "LABEL", "SIZE", "LAST", "ACCESS"]
    assert lines[-1].startswith("would evict 3 entries") and "dry run" in lines[-1]
    listed = {line.split()[0] for line in lines[1:-1]}
    assert listed == {arts[0].key, arts[1].key, arts[3].key}
    r = run_cli("evict", "--older-than", "3s", server=server)
    assert r.returncode == EXIT_OK and r.stdout.splitlines()[-1].startswith("evicted 3 entries")
    assert {line.split()[0] for line in r.stdout.splitlines()[1:-1]} == listed
    assert server.keys() == {arts[2].key}


def test_evict_usage(server):
    assert run_cli("evict", server=server).returncode == EXIT_USAGE
    assert run_cli("evict", "--max-bytes", "12Q", server=server).returncode == EXIT_USAGE
    r = run_cli("evict", "--target", "tpu", server=server)
    assert r.returncode == EXIT_OK and r.stdout.strip() == "evicted 0 entries, 0 B"


def test_rm(server):
    a, b, c, d = populate(server)
    r = run_cli("rm", a.key, b.key[:12], server=server)
    assert r.returncode == EXIT_OK, r.stderr
    assert r.stdout.split() == ["removed", a.key, "removed", b.key]
    assert server.keys() == {c.key, d.key}
    r = run_cli("rm", c.key, a.key, server=server)
    assert r.returncode == EXIT_NOT_FOUND and "1 of 2 keys" in r.stderr
    assert server.keys() == {d.key}
    j = run_cli("--json", "rm", d.key, "f" * 64, server=server)
    assert j.returncode == EXIT_NOT_FOUND
    import json
    assert json.loads(j.stdout) == {"removed": [d.key], "not_found": ["f" * 64]}
