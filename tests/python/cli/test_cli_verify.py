"""kcache verify: finds and, with --remove, drops a corrupted object planted
in the disk store."""

from __future__ import annotations

import json

from cli_harness import (
    EXIT_ERROR, EXIT_OK, make_artifact, requires_binaries, run_cli,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries


def flip_bytes(path, offset: int = 40, count: int = 4):
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + count):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_verify_clean(server):
    for _ in range(3):
        server.put(make_artifact())
    r = run_cli("verify", server=server)
    assert r.returncode == EXIT_OK, r.stderr
    rows = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert rows["checked"] == "3" and rows["corrupt"] == "0" and rows["removed"] == "0"
    assert "elapsed" in rows


def test_verify_finds_and_removes_planted_corruption(server):
    good = [server.put(make_artifact()) for _ in range(3)]
    bad = server.put(make_artifact())
    obj = server.object_path(bad.key)
    assert obj.exists(), list(server.data.rglob("*"))
    flip_bytes(obj)

    r = run_cli("verify", server=server)
    assert r.returncode == EXIT_ERROR
    assert "corrupt objects\n  " + bad.key in r.stdout
    assert "verify --remove" in r.stderr
    assert bad.key in server.keys()  # reported, not removed

    r = run_cli("--json", "verify", "--remove", server=server)
    assert r.returncode == EXIT_OK, r.stderr
    rep = json.loads(r.stdout)
    assert rep["checked"] == 4 and rep["corrupt"] == [bad.key] and rep["removed"] == 1
    assert server.keys() == {a.key for a in good}

    r = run_cli("--json", "verify", server=server)
    assert r.returncode == EXIT_OK and json.loads(r.stdout)["corrupt"] == []
