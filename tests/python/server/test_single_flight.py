"""Single-flight: 32 clients, one compile; waiters woken by the landing."""

from __future__ import annotations

import threading
import time

from server_harness import make_bundle, metric_value, new_key, wait_for_metric_at_least

CLIENTS = 32
WAIT_MS = 120000


def test_32_clients_one_lease_all_get_the_artifact(server):
    key = new_key()
    bundle = make_bundle(key, payload=b"compiled kernels" * 100)
    barrier = threading.Barrier(CLIENTS)
    results: list[dict] = [dict() for _ in range(CLIENTS)]
    put_done_at = {}
    waited_before = metric_value(server, "kcache_leases_waited_total")

    def client(i: int):
        res = results[i]
        barrier.wait()
        g = server.get(f"/v1/artifacts/{key}")
        if g.status == 200:
            res["artifact"] = g.body
            return
        r = server.request("POST", f"/v1/leases/{key}")
        res["lease_status"] = r.status
        if r.status == 201:
            token = r.json()["lease"]
            # "Compile" until every other client has parked its waiting GET
            # (the counter rises just before a GET parks; a PUT after that
            # always wakes it), so all of them are woken by this landing.
            wait_for_metric_at_least(server, "kcache_leases_waited_total", waited_before + CLIENTS - 1, 60,
                                     "not every other client parked a waiting GET")
            p = server.put_artifact(key, bundle, headers={"X-Kcache-Lease": token})
            put_done_at["t"] = time.monotonic()
            res["put"] = p.status
            res["artifact"] = bundle
        elif r.status == 409:
            w = server.get(f"/v1/artifacts/{key}?wait_ms={WAIT_MS}", timeout=150)
            res["woke_at"] = time.monotonic()
            res["wait_status"] = w.status
            res["artifact"] = w.body if w.status == 200 else None
        else:
            res["artifact"] = server.get(f"/v1/artifacts/{key}").body

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)

    granted = [r for r in results if r.get("lease_status") == 201]
    assert len(granted) == 1, [r.get("lease_status") for r in results]
    assert granted[0]["put"] == 201
    assert all(r.get("artifact") == bundle for r in results), [
        (r.get("lease_status"), r.get("wait_status")) for r in results]
    waiters = [r for r in results if "woke_at" in r]
    assert len(waiters) == CLIENTS - 1  # all but the holder: the PUT waited for each to park
    lat_ms = sorted((r["woke_at"] - put_done_at["t"]) * 1000 for r in waiters)
    worst = max(0.0, lat_ms[-1])
    print(f"\nsingle-flight: {len(waiters)} waiters; wake latency after PUT returned: "
          f"median {lat_ms[len(lat_ms) // 2]:.1f} ms, max {worst:.1f} ms (wait_ms={WAIT_MS})")
    # Woken by the landing, not by wait_ms running out: each waiting GET
    # answered 200 with the artifact (checked above) long before a
    # WAIT_MS expiry could have; the latency is printed above and measured
    # in bench/server, not asserted here.
    assert all(r["wait_status"] == 200 for r in waiters)
    stats = server.get("/v1/stats").json()
    assert stats["leases"]["waited"] >= len(waiters)
    assert metric_value(server, "kcache_leases_waited_total") - waited_before == CLIENTS - 1
