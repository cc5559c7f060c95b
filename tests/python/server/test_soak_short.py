"""bench/server/soak.py in its short mode (~30 s; on a loaded machine longer,
until every event has happened): mixed HTTP, lease and
RESP load on a kcache-server with Redis storage (appendonly yes, appendfsync
always) while the server, then Redis, then both are killed with SIGKILL and
restarted. Every acknowledged upload and SET must read back byte-identical,
no read may return wrong bytes or a miss for an acknowledged key, and
storage must scrub clean. (The 10-minute runs and their report:
bench/server/soak.json, SOAK.md.) This found MGET answering nulls, not an
error, while Redis was down."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from server_harness import REDIS, REPO, SERVER_BIN

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server not installed")


def test_short_soak_with_server_and_redis_killed(tmp_path):
    out = tmp_path / "soak.json"
    p = subprocess.run([sys.executable, str(REPO / "bench/server/soak.py"), "--seconds", "24",
                        "--first-event-s", "4", "--event-every", "6", "--down-s", "0.5",
                        "--events", "server,redis,both", "--all-events", "--server-bin", str(SERVER_BIN), "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert out.exists(), p.stdout[-3000:] + p.stderr[-3000:]
    run = json.loads(out.read_text())["runs"][0]
    summary = {"anomalies": run["anomaly_counts"], "final": run["final"]["counts"],
               "lost": run["final"]["lost"][:5], "events": run["events"]}
    assert p.returncode == 0, json.dumps(summary, indent=1) + p.stderr[-3000:]
    assert {e["what"] for e in run["events"]} == {"server", "redis", "both"}, summary
    assert run["written"]["http_acked"] > 50 and run["written"]["resp_acked"] > 50, run["written"]
    assert run["final"]["counts"]["http_acked_ok"] == run["written"]["http_acked"]
    assert run["final"]["counts"]["resp_acked_ok"] == run["written"]["resp_acked"]
    for e in run["events"]:  # every kind of request came back after every restart
        assert None not in e["probe_recovery_s"].values(), e
    assert run["final"]["verify"]["corrupt"] == []
