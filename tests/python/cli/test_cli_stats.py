"""kcache stats: table and JSON, against counters the test caused."""

from __future__ import annotations

import pytest

from cli_harness import (
    EXIT_OK, cli_json, make_artifact, requires_binaries, run_cli, value_column,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries


@pytest.fixture
def busy(server):
    a = server.put(make_artifact("GPT2Block/cpu:avx512/f32/default/train", compile_seconds=2.0))
    b = server.put(make_artifact("GPT2MLP/cpu:avx512/f32/default/train", compile_seconds=1.0))
    c = server.put(make_artifact("GPT2Block/cuda:sm_90/bf16/max-autotune/infer", compile_seconds=30.0))
    for art, n in ((a, 3), (c, 1)):
        for _ in range(n):
            assert server.request("GET", f"/v1/artifacts/{art.key}")[0] == 200
    assert server.request("GET", f"/v1/artifacts/{'0' * 64}")[0] == 404
    assert server.request("PUT", f"/v1/artifacts/{a.key}", a.bundle)[0] == 200  # already present
    assert server.request("PUT", f"/v1/artifacts/{b.key}", b"not a bundle")[0] == 400
    return a, b, c


def test_stats_json(server, busy):
    s = cli_json("stats", server=server)
    assert s["storage"]["entries"] == 3
    assert s["hits"] == 4 and s["misses"] == 1 and abs(s["hit_ratio"] - 0.8) < 1e-9
    assert s["uploads"] == {"stored": 3, "already_present": 1, "rejected": 1}
    assert s["backend"] == "disk" and s["health"]["ready"] is True
    assert s["version"].startswith("kcache/")
    assert s["by_target"]["cpu:avx512"]["entries"] == 2 and s["by_target"]["cuda:sm_90"]["hits"] == 1
    assert s["by_mode"]["max-autotune"]["entries"] == 1
    # hits × compile time of the stored entries: 3 × 2.0 s + 1 × 30 s.
    assert s["compile_time_saved_s"] == pytest.approx(36.0)


def test_stats_table(server, busy):
    r = run_cli("stats", server=server)
    assert r.returncode == EXIT_OK, r.stderr
    block, _, rest = r.stdout.partition("\n\n")
    lines = block.splitlines()
    assert len(value_column(lines)) == 1, block  # values in one column
    rows = {line[:20].strip(): line[20:].strip() for line in lines}
    assert rows["entries"] == "3" and rows["hits"] == "4" and rows["misses"] == "1"
    assert rows["hit ratio"] == "80.0%" and rows["rejected puts"] == "1"
    assert rows["health"] == "ready" and rows["storage backend"] == "disk"
    assert rows["puts"].startswith("4 (3 stored, 1 already present)")
    assert rows["compile time saved"].startswith("36s")
    for name in ("bytes used", "byte budget", "uptime", "version", "leases granted", "leases renewed",
                 "leases waited", "leases expired", "evictions", "storage errors"):
        assert name in rows
    assert "by target\nTARGET" in rest and "cuda:sm_90" in rest and "by mode\nMODE" in rest


def test_stats_byte_budget_shown(tmp_path):
    from cli_harness import Server
    s = Server(tmp_path, args=["--max-bytes", "1G"])
    try:
        r = run_cli("stats", server=s)
        assert "1.0 GiB" in r.stdout
    finally:
        assert s.stop() == 0
