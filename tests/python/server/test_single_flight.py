"""Single-flight: 32 clients, one compile; waiters woken by the landing."""

from __future__ import annotations

import threading
import time

from server_harness import make_bundle, new_key

CLIENTS = 32
WAIT_MS = 120000
COMPILE_S = 0.5


def test_32_clients_one_lease_all_get_the_artifact(server):
    key = new_key()
    bundle = make_bundle(key, payload=b"compiled kernels" * 100)
    barrier = threading.Barrier(CLIENTS)
    results: list[dict] = [dict() for _ in range(CLIENTS)]
    put_done_at = {}

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
            time.sleep(COMPILE_S)  # "compile"
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
    assert len(waiters) >= CLIENTS - 2  # all but the holder (and at most a straggler that saw it land)
    lat_ms = sorted((r["woke_at"] - put_done_at["t"]) * 1000 for r in waiters)
    worst = max(0.0, lat_ms[-1])
    print(f"\nsingle-flight: {len(waiters)} waiters; wake latency after PUT returned: "
          f"median {lat_ms[len(lat_ms) // 2]:.1f} ms, max {worst:.1f} ms (wait_ms={WAIT_MS})")
    # Woken by the landing, not by a poll or by wait_ms running out (a bound
    # far from both, safe on a loaded machine; the latency itself is
    # printed above and measured in bench/server).
    assert worst < 0.25 * WAIT_MS
    stats = server.get("/v1/stats").json()
    assert stats["leases"]["waited"] >= len(waiters)
