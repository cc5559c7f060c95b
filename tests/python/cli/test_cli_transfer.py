"""kcache get and put, for debugging."""

from __future__ import annotations

import json

from cli_harness import (
    EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, cli_json, make_artifact, requires_binaries,
    run_cli,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries


def test_put_then_get_round_trip(server, tmp_path):
    art = make_artifact()
    f = tmp_path / "a.kcb"
    f.write_bytes(art.bundle)
    r = run_cli("put", str(f), server=server)
    assert r.returncode == EXIT_OK, r.stderr
    assert r.stdout.startswith(f"stored {art.key}  {art.label}")
    j = cli_json("put", str(f), server=server)
    assert j["stored"] is False and j["key"] == art.key

    out = tmp_path / "copy.kcb"
    r = run_cli("get", art.key, "-o", str(out), server=server)
    assert r.returncode == EXIT_OK, r.stderr
    assert out.read_bytes() == art.bundle and "wrote" in r.stdout
    j = cli_json("get", art.key[:8], "-o", str(tmp_path / "c2.kcb"), server=server)
    assert j["bytes"] == len(art.bundle) and j["key"] == art.key
    import os
    import subprocess
    from cli_harness import CLI_BIN
    env = {**os.environ, "KCACHE_URL": server.url}
    raw = subprocess.run([str(CLI_BIN), "get", art.key, "-o", "-"], capture_output=True, env=env, timeout=10)
    assert raw.returncode == EXIT_OK and raw.stdout == art.bundle  # stdout carries only the bundle


def test_get_put_errors(server, tmp_path):
    out = tmp_path / "none.kcb"
    assert run_cli("get", "e" * 64, "-o", str(out), server=server).returncode == EXIT_NOT_FOUND
    assert not out.exists()
    bad = tmp_path / "bad.kcb"
    bundle = bytearray(make_artifact().bundle)
    bundle[50] ^= 0xFF
    bad.write_bytes(bytes(bundle))
    r = run_cli("put", str(bad), server=server)
    assert r.returncode == EXIT_ERROR and "not a valid kcache bundle" in r.stderr
    assert server.keys() == set()
    assert run_cli("put", str(tmp_path / "missing.kcb"), server=server).returncode == EXIT_USAGE
    assert run_cli("get", "e" * 64, server=server).returncode == EXIT_USAGE  # -o is required
    json.dumps(r.stderr)
