"""kcache ls: filters, sorting, limits, cursor following, table and JSON."""

from __future__ import annotations

import os

from cli_harness import (
    EXIT_OK, Server, cli_json, columns_aligned, make_artifact, requires_binaries, run_cli,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries


def populate(server):
    arts = [
        server.put(make_artifact("GPT2Block/cpu:avx512/f32/default/train", payload=os.urandom(5000))),
        server.put(make_artifact("GPT2MLP/cpu:avx512/f32/default/train", payload=os.urandom(100))),
        server.put(make_artifact("GPT2Block/cuda:sm_90/bf16/max-autotune/infer", payload=os.urandom(20000),
                                 toolchain='{"torch": "2.12.0"}')),
    ]
    for _ in range(2):
        server.request("GET", f"/v1/artifacts/{arts[1].key}")
    return arts


def test_ls_table(server):
    arts = populate(server)
    r = run_cli("ls", server=server)
    assert r.returncode == EXIT_OK, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["LABEL", "KEY", "SIZE", "AGE", "LAST", "ACCESS", "HITS", "COMPILE", "VALUE", "s/MiB", "PIN", "TOOLCHAIN"]
    assert columns_aligned(lines[:-1]), r.stdout
    assert lines[-1].startswith("3 entries, ")
    for a in arts:
        assert any(a.key[:12] in line and a.label in line for line in lines)
    assert "torch-2.12.0" in r.stdout and "torch-2.13.0" in r.stdout


def test_ls_filters_and_json(server):
    a, b, c = populate(server)
    def keys(*args):
        return [e["key"] for e in cli_json("ls", *args, server=server)["entries"]]
    assert set(keys("--target", "cpu:avx512")) == {a.key, b.key}
    assert keys("--mode", "max-autotune") == [c.key]
    assert set(keys("--label-prefix", "GPT2Block/")) == {a.key, c.key}
    assert keys("--toolchain", "torch-2.12.0") == [c.key]
    assert keys("--target", "tpu") == []
    assert keys("--sort", "size") == [c.key, a.key, b.key]
    assert keys("--sort", "size", "--reverse") == [b.key, a.key, c.key]
    assert keys("--sort", "hits")[0] == b.key
    assert keys("--sort", "last-access")[0] == b.key
    out = cli_json("ls", "--sort", "size", "--limit", "2", server=server)
    assert [e["key"] for e in out["entries"]] == [c.key, a.key] and out["truncated"] is True
    e = cli_json("ls", "--mode", "max-autotune", server=server)["entries"][0]
    assert e["label"] == c.label and e["target"] == "cuda:sm_90" and e["compile_ms"] == 1500


def test_ls_follows_the_cursor(tmp_path):
    # More entries than one page (1000): memory storage keeps this fast.
    s = Server(tmp_path, storage="memory:")
    try:
        import http.client
        conn = http.client.HTTPConnection(s.host, s.port, timeout=10)
        keys = set()
        for _ in range(1003):
            art = make_artifact(payload=b"p")
            conn.request("PUT", f"/v1/artifacts/{art.key}", body=art.bundle)
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 201
            keys.add(art.key)
        conn.close()
        out = cli_json("ls", server=s)
        assert {e["key"] for e in out["entries"]} == keys and out["truncated"] is False
        r = run_cli("ls", "--limit", "1001", server=s)
        assert r.stdout.splitlines()[-1].startswith("1001 entries") and "--limit" in r.stdout
    finally:
        assert s.stop() == 0
