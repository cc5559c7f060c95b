"""kcache leases: who is compiling what, since when."""

from __future__ import annotations

import json

from cli_harness import (
    EXIT_OK, cli_json, columns_aligned, requires_binaries, run_cli,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries


def test_leases(server):
    r = run_cli("leases", server=server)
    assert r.returncode == EXIT_OK and r.stdout.startswith("no leases held")
    k1, k2 = "1" * 64, "2" * 64
    assert server.request("POST", f"/v1/leases/{k1}", headers={"X-Kcache-Client": "rank-3"})[0] == 201
    status, body = server.request("POST", f"/v1/leases/{k2}", headers={"X-Kcache-Client": "rank-5"})
    token = json.loads(body)["lease"]
    assert server.request("POST", f"/v1/leases/{k2}/renew", headers={"X-Kcache-Lease": token})[0] == 200

    r = run_cli("leases", server=server)
    assert r.returncode == EXIT_OK, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["KEY", "HOLDER", "SINCE", "ACQUIRED", "REMAINING", "RENEWALS"]
    assert columns_aligned(lines[:-1]), r.stdout
    assert lines[1].startswith(k1) and "rank-3" in lines[1] and lines[1].endswith(" 0")
    assert lines[2].startswith(k2) and "rank-5" in lines[2] and lines[2].endswith(" 1")
    assert lines[-1] == "2 leases held (lease TTL 1m00s)"
    assert token not in r.stdout

    j = cli_json("leases", server=server)
    assert [(x["key"], x["renewals"]) for x in j["leases"]] == [(k1, 0), (k2, 1)]
    assert j["leases"][0]["holder"].endswith("rank-3")
