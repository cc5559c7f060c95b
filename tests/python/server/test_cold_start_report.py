"""POST /v1/cold-start (docs/protocol.md): a rank's cold-start counters added
to the server's metrics; a malformed report is refused whole and changes
nothing. The client's side, from a real cold job, is in
tests/python/compile/test_cold_background.py."""

from __future__ import annotations

import json

import pytest

METRICS = {
    "eager_block_calls": "kcache_eager_block_calls_total",
    "regions_switched": "kcache_regions_switched_total",
    "background_compile_seconds": "kcache_background_compile_seconds_total",
    "background_refusals": "kcache_background_refusals_total",
    "background_faults": "kcache_background_faults_total",
}


def report(srv, body: bytes):
    return srv.request("POST", "/v1/cold-start", body=body, headers={"Content-Type": "application/json"})


def counters(srv) -> dict[str, float]:
    m = srv.metrics()
    return {field: m[name] for field, name in METRICS.items()}


def test_reports_add_up_in_the_metrics(server):
    before = counters(server)
    assert report(server, json.dumps({"eager_block_calls": 120, "regions_switched": 2,
                                      "background_compile_seconds": 31.25}).encode()).status == 204
    assert report(server, json.dumps({"eager_block_calls": 5, "background_faults": 1,
                                      "background_refusals": 1}).encode()).status == 204
    assert report(server, b"{}").status == 204  # nothing to add
    after = counters(server)
    assert {k: after[k] - before[k] for k in METRICS} == {
        "eager_block_calls": 125, "regions_switched": 2, "background_compile_seconds": 31.25,
        "background_refusals": 1, "background_faults": 1}


@pytest.mark.parametrize("body,says", [
    (b"", "JSON object"),
    (b"[1, 2]", "JSON object"),
    (b'{"eager_block_calls": 3', "JSON object"),
    (b'{"eager_block_calls": 3, "gpu_hours": 1}', "unknown field 'gpu_hours'"),
    (b'{"eager_block_calls": -1}', "whole number"),
    (b'{"eager_block_calls": 1.5}', "whole number"),
    (b'{"eager_block_calls": "7"}', "whole number"),
    (b'{"background_compile_seconds": -0.5}', "out of range"),
    (b'{"background_compile_seconds": 1e300}', "out of range"),
    (b'{"regions_switched": 1e30}', "whole number"),
    (json.dumps({"eager_block_calls": 1, "pad": "x" * 5000}).encode(), "at most 4096 bytes"),
])
def test_a_malformed_report_is_refused_whole(server, body, says):
    before = counters(server)
    # A valid field before the bad one: nothing of the report is added.
    r = report(server, body)
    assert r.status == 400, r.body[:200]
    assert r.json()["error"] == "bad_report" and says in r.json()["message"], r.json()
    assert counters(server) == before


def test_only_post(server):
    r = server.request("GET", "/v1/cold-start")
    assert r.status == 405 and r.headers["allow"] == "POST"
