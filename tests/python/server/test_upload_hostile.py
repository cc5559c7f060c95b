"""Uploads and the other routes against hostile clients, over real sockets
to a real kcache-server: a body declared huge and never sent maps no memory
and is cut off when it stops making progress; the bytes all uploads may
hold at once are bounded server-wide (503, Retry-After); many leases, up to
the lease table's cap (503 too_many_leases); concurrent /v1/stats share one
scan of the store; entry inspections run two at a time and read a
bundle's header, manifest and section table, never its data. A
legitimate upload and GETs keep working throughout."""

from __future__ import annotations

import concurrent.futures
import os
import socket
import time

import pytest

from server_harness import make_bundle, metric_value, new_key, read_until_quiet, status_of, wait_until
from test_resp_hostile import closed_by_server

MIB = 1 << 20


def vm_kib(srv, field: str) -> int:
    for line in open(f"/proc/{srv.proc.pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def start_upload(srv, declared: int, sent: bytes = b"x" * 1024) -> socket.socket:
    s = srv.connect()
    key = new_key()
    s.sendall((f"PUT /v1/artifacts/{key} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n"
               f"Content-Length: {declared}\r\n\r\n").encode() + sent)
    return s


def test_a_stalled_huge_upload_maps_nothing_and_is_cut_off(start_server):
    # Before: the body reserved its declared length up front (2 GiB of
    # virtual memory per writer) and had 30 s + size / 1 MiB/s to arrive.
    srv = start_server(args=["--max-body-bytes", "2G"])  # --read-timeout-ms 3000 in the harness
    before = vm_kib(srv, "VmSize")
    stalled = [start_upload(srv, 2 * 1024 * MIB) for _ in range(3)]
    time.sleep(0.5)
    assert (vm_kib(srv, "VmSize") - before) * 1024 < 256 * MIB
    start = time.monotonic()
    for s in stalled:
        assert closed_by_server(s, 20), "a stalled upload was never cut off"
        s.close()
    assert time.monotonic() - start < 20
    key = new_key()
    bundle = make_bundle(key)
    assert srv.put_artifact(key, bundle).status == 201
    assert srv.get(f"/v1/artifacts/{key}").body == bundle
    assert "request body not complete in time" in srv.read_log()


def test_a_slow_but_steady_upload_is_not_cut_off(start_server):
    # Positive control for the progress deadline: bytes that keep coming
    # at the minimum rate keep the upload alive past --read-timeout-ms.
    srv = start_server(args=["--min-transfer-rate", "4096"])
    key = new_key()
    bundle = make_bundle(key, payload=b"p" * 30000)
    s = srv.connect()
    s.sendall((f"PUT /v1/artifacts/{key} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n"
               f"Content-Length: {len(bundle)}\r\n\r\n").encode())
    step = 2048
    for i in range(0, len(bundle), step):  # ~8 KiB/s for ~4 s, past the 3 s read timeout
        s.sendall(bundle[i:i + step])
        time.sleep(0.25)
    assert status_of(read_until_quiet(s, 10)) == 201
    s.close()
    assert srv.get(f"/v1/artifacts/{key}").body == bundle


def test_upload_bytes_in_flight_are_bounded_server_wide(start_server):
    srv = start_server(args=["--max-body-bytes", "64M", "--max-upload-bytes-in-flight", "128M",
                             "--read-timeout-ms", "20000"])
    held = [start_upload(srv, 60 * MIB), start_upload(srv, 60 * MIB)]
    time.sleep(0.3)
    third = start_upload(srv, 60 * MIB)
    reply = read_until_quiet(third, 5)
    assert status_of(reply) == 503 and b"uploads_busy" in reply and b"Retry-After: 1" in reply
    third.close()
    # A small upload still fits in what is left; GETs are unaffected.
    key = new_key()
    bundle = make_bundle(key)
    assert srv.put_artifact(key, bundle).status == 201
    assert srv.get("/healthz").status == 200
    for s in held:  # the writers go away: their bytes return to the budget
        s.close()

    def upload_accepted():
        # Retried while the server has not yet seen the writers go: until
        # then it answers uploads_busy, as above.
        s = start_upload(srv, 60 * MIB)
        reply = read_until_quiet(s, 0.5)
        if not reply:
            return s
        s.close()
        assert status_of(reply) == 503 and b"uploads_busy" in reply, reply[:300]
        return None

    again = wait_until(upload_accepted, 30, "the closed writers' bytes did not return to the budget",
                       interval=0.05)
    assert not closed_by_server(again, 0.5)  # accepted, waiting for its body
    again.close()


def test_many_leases_keep_the_server_answering_and_all_expire(start_server):
    # A writer that takes leases and never uploads: each costs a table entry
    # until its TTL; the server keeps answering and drops them all.
    import http.client

    srv = start_server(args=["--lease-ttl-ms", "1500"])
    before = vm_kib(srv, "VmRSS")
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    for i in range(3000):
        conn.request("POST", f"/v1/leases/{new_key()}")
        r = conn.getresponse()
        r.read()
        assert r.status == 201
        if i % 1000 == 0:
            assert srv.get("/healthz").status == 200
    conn.close()
    assert (vm_kib(srv, "VmRSS") - before) * 1024 < 64 * MIB
    deadline = time.monotonic() + 60
    while srv.get("/v1/stats").json()["leases"]["expired"] < 3000:
        assert time.monotonic() < deadline, srv.get("/v1/stats").json()["leases"]
        time.sleep(0.5)
    assert srv.get("/v1/stats").json()["leases"]["active"] == 0
    key = new_key()
    bundle = make_bundle(key)
    assert srv.put_artifact(key, bundle).status == 201 and srv.get(f"/v1/artifacts/{key}").body == bundle


@pytest.fixture(params=["memory", "redis", "redis-cluster"])
def lease_storage(request, tmp_path):
    """The --storage URI of each lease table: in-process, Redis, Redis Cluster."""
    if request.param == "memory":
        yield "memory:"
    elif request.param == "redis":
        yield request.getfixturevalue("redis_url")
    else:
        from cluster_harness import REDIS_CLI, RedisCluster

        if REDIS_CLI is None:
            pytest.skip("redis-cli not installed")
        c = RedisCluster(tmp_path / "cluster", replicas=0)
        yield c.url()
        c.stop()


def test_the_lease_table_is_capped(start_server, lease_storage):
    # Before: nothing bounded the in-process lease table but the TTL — a
    # writer taking leases on fresh keys faster than they expire grew it
    # without limit — and on Redis storage the shared leases were Redis keys
    # bounded only by maxmemory. Past --max-leases a new lease is 503
    # too_many_leases; the leases already held are untouched, and one
    # released makes room.
    srv = start_server(args=["--max-leases", "20", "--lease-ttl-ms", "60000"], storage=lease_storage)
    held = {}
    for _ in range(20):
        key = new_key()
        r = srv.request("POST", f"/v1/leases/{key}")
        assert r.status == 201, r.body
        held[key] = r.json()["lease"]
    r = srv.request("POST", f"/v1/leases/{new_key()}")
    assert r.status == 503 and r.json()["error"] == "too_many_leases", (r.status, r.body)
    assert r.headers["retry-after"] == "1"
    assert srv.get("/v1/stats").json()["leases"]["active"] == 20
    key, token = next(iter(held.items()))
    assert srv.request("POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": token}).status == 200
    assert srv.request("DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token}).status == 204
    fresh = new_key()
    assert srv.request("POST", f"/v1/leases/{fresh}").status == 201
    # Uploads and reads do not need a lease: they go on at the cap.
    bundle = make_bundle(fresh)
    assert srv.put_artifact(fresh, bundle).status == 201 and srv.get(f"/v1/artifacts/{fresh}").body == bundle
    assert srv.get("/healthz").status == 200


def test_expired_leases_make_room_at_the_cap(start_server, lease_storage):
    # At the cap, leases that ran out count no more: the next acquire drops
    # them (in Redis, from the shared live set) and is granted, with no
    # release by anyone.
    srv = start_server(args=["--max-leases", "5", "--lease-ttl-ms", "1000"], storage=lease_storage)
    for _ in range(5):
        assert srv.request("POST", f"/v1/leases/{new_key()}").status == 201
    deadline = time.monotonic() + 30
    while (r := srv.request("POST", f"/v1/leases/{new_key()}")).status != 201:
        assert r.status == 503 and r.json()["error"] == "too_many_leases", (r.status, r.body)
        assert time.monotonic() < deadline, "expired leases never made room"
        time.sleep(0.2)
    assert srv.get("/v1/stats").json()["leases"]["expired"] >= 1


def fill_over_resp(srv, n: int, sized: bool = False):
    """n entries fill:0 … fill:<n-1> stored over RESP (value "v", or 1-7
    bytes with `sized`), 5000 per pipeline; returns the RESP client."""
    import redis

    r = redis.Redis(port=srv.resp_port, socket_timeout=30)
    for base in range(0, n, 5000):
        p = r.pipeline(transaction=False)
        for i in range(base, base + 5000):
            p.set(f"fill:{i}", b"v" * (i % 7 + 1) if sized else b"v")
        p.execute()
    return r


def test_concurrent_stats_share_one_scan_of_the_store(start_server, redis_url):
    # /v1/stats breaks usage down by target and mode; on Redis storage (disk
    # and memory keep counters) that is a scan of the whole store (up to
    # 200,000 entries). Before, each request scanned on its own: a reader
    # asking many times at once made the server scan as many times. Now one
    # scan runs at a time and concurrent requests share it. The first scan
    # is held after it has read the store (KCACHE_FAULT_PAUSE_SCAN_MS, whose
    # log line is the event); the fifteen sent after the line arrive while
    # it runs and share it.
    n = 20000
    srv = start_server(args=["--resp-listen", "127.0.0.1:0"], storage=redis_url,
                       env={"KCACHE_FAULT_PAUSE_SCAN_MS": "3000"})
    r = fill_over_resp(srv, n)
    e0 = entries_copied(srv)
    assert srv.get("/v1/stats", timeout=60).json()["storage"]["entries"] == n
    assert entries_copied(srv) - e0 == n  # one request: one scan of every entry
    log_mark = srv.read_log().count("kcache stats scan paused")

    e1 = entries_copied(srv)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        first = ex.submit(lambda: srv.get("/v1/stats", timeout=60).status)
        wait_until(lambda: srv.read_log().count("kcache stats scan paused") > log_mark, 60,
                   "the first /v1/stats scan never paused")
        rest = list(ex.map(lambda _: srv.get("/v1/stats", timeout=60).status, range(15)))
        statuses = [first.result()] + rest
    copies = entries_copied(srv) - e1
    print(f"\n16 /v1/stats at once: {copies} entries copied for {n} stored")
    assert statuses == [200] * 16
    assert copies == n, copies  # one scan shared by all 16, not 16


def test_entry_inspections_are_a_few_at_a_time(start_server, tmp_path):
    # GET /v1/entries/{key} once read and checked a whole object (now its
    # headers only). Before, any number ran at once (each holding a copy of
    # the object); now two, and the rest are 503 busy with Retry-After.
    # Two inspections are held in flight by the disk backend's read pause
    # (each prints its key when its first read pauses: the event waited on),
    # then six more arrive: every one is refused, none waits.
    srv = start_server(storage=f"disk:{tmp_path}/d", env={"KCACHE_FAULT_PAUSE_READ_MS": "1500"})
    keys = [new_key() for _ in range(3)]
    for key in keys:
        assert srv.put_artifact(key, make_bundle(key, payload=os.urandom(4096))).status == 201

    def inspect(key):
        r = srv.get(f"/v1/entries/{key}", timeout=60)
        return r.status, r.headers.get("retry-after"), r.json().get("error")

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        held = [ex.submit(inspect, key) for key in keys[:2]]
        wait_until(lambda: all(f"read of {key} paused" in srv.read_log() for key in keys[:2]), 30,
                   "the two inspections never reached storage")
        late = list(ex.map(inspect, [keys[2]] * 6))
        first = [f.result() for f in held]
    assert [a[0] for a in first] == [200, 200], first
    assert late == [(503, "1", "busy")] * 6, late
    assert srv.get(f"/v1/entries/{keys[2]}").json()["manifest"]["key"] == keys[2]  # alone: answered
    assert srv.get("/healthz").status == 200


def bytes_read(srv) -> int:
    """What the server has read with read()/pread() so far (rchar: page-cache hits count too)."""
    for line in open(f"/proc/{srv.proc.pid}/io"):
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


def test_an_entry_inspection_reads_only_the_bundle_header_and_table(start_server, tmp_path):
    # Before: GET /v1/entries/{key} read the whole object (64 MiB here) to
    # summarize its header, manifest and section table. Now storage reads
    # those parts by range (pread on disk), the section data never.
    srv = start_server(args=["--max-body-bytes", "128M"], storage=f"disk:{tmp_path / 'store'}")
    key = new_key()
    bundle = make_bundle(key, payload=os.urandom(64 * MIB))
    assert srv.put_artifact(key, bundle).status == 201
    before = bytes_read(srv)
    r = srv.get(f"/v1/entries/{key}", timeout=60)
    read = bytes_read(srv) - before
    assert r.status == 200, r.body
    print(f"\ninspection of a {len(bundle)}-byte entry read {read} bytes")
    assert read < 256 * 1024, read
    body = r.json()
    assert body["manifest"]["key"] == key and body["entry"]["size"] == len(bundle)
    assert [s["name"] for s in body["bundle"]["sections"]] == ["mega_cache"]
    assert body["bundle"]["total_bytes"] == len(bundle) and body["bundle"]["digest"] == bundle[-32:].hex()
    assert body["bundle"]["digest_checked"] is False
    assert body["entry"]["hits"] == 0 and srv.get(f"/v1/artifacts/{key}").body == bundle


def test_an_inspection_of_a_truncated_stored_object_says_so(start_server, tmp_path):
    # The stored file cut short behind the server's back: the inspection
    # names the defect (corrupt, sizes), and a GET then quarantines it.
    store = tmp_path / "store"
    srv = start_server(storage=f"disk:{store}")
    key = new_key()
    bundle = make_bundle(key, payload=os.urandom(100_000))
    assert srv.put_artifact(key, bundle).status == 201
    path = store / "objects" / key[:2] / key
    os.truncate(path, 5000)
    r = srv.get(f"/v1/entries/{key}")
    assert r.status == 200, r.body
    body = r.json()
    assert body["bundle"] is None and body["bundle_error"]["error"] == "corrupt", body
    assert "5000 bytes" in body["bundle_error"]["message"], body
    assert srv.get(f"/v1/artifacts/{key}").status == 404


def entries_copied(srv) -> int:
    return int(metric_value(srv, "kcache_storage_list_entries_copied_total"))


def test_paging_and_stats_copy_no_whole_index(start_server):
    # Before: every GET /v1/entries page copied (and sorted) the whole
    # index, so paging through n entries copied n × n / limit of them, and
    # /v1/stats scanned every entry for its breakdown. Now a page copies
    # the limit + 1 entries it needs (key order: from the cursor on; other
    # orders: one pass keeping a bounded heap of pointers), and the
    # breakdown comes from counters the store keeps on put/remove/get.
    n, limit = 40000, 1000
    srv = start_server(args=["--resp-listen", "127.0.0.1:0"])
    r = fill_over_resp(srv, n, sized=True)
    c0 = entries_copied(srv)
    stats = srv.get("/v1/stats").json()
    assert stats["storage"]["entries"] == n
    assert stats["by_mode"]["resp"]["entries"] == n and not stats["breakdown_truncated"], stats["by_mode"]
    assert entries_copied(srv) == c0, "the stats breakdown scanned the index"

    for sort in ("key", "size"):
        for order in ("asc", "desc"):
            c0 = entries_copied(srv)
            seen, cursor, pages = [], None, 0
            while True:
                q = f"/v1/entries?limit={limit}&sort={sort}&order={order}" + (f"&cursor={cursor}" if cursor else "")
                page = srv.get(q).json()
                seen += [(e["size"], e["key"]) if sort == "size" else e["key"] for e in page["entries"]]
                pages += 1
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            copied = entries_copied(srv) - c0
            print(f"\nsort={sort} order={order}: {pages} pages, {copied} entries copied")
            assert len(seen) == n and len(set(seen)) == n
            assert seen == sorted(seen, reverse=order == "desc")
            assert copied <= pages * (limit + 1), (sort, order, pages, copied)
    # Removing and reading move the counters, as the scan saw them.
    r.delete("fill:0", "fill:1")
    r.get("fill:2")
    stats = srv.get("/v1/stats").json()
    assert stats["by_mode"]["resp"]["entries"] == n - 2 == stats["storage"]["entries"]
    assert stats["by_mode"]["resp"]["hits"] >= 1


def test_redis_storage_pages_by_key_without_reading_the_whole_index(start_server, redis_url, redis_server):
    # Before: on Redis storage every GET /v1/entries page read the whole
    # index (every entry's meta) and sorted it: paging through n entries
    # copied n × n / limit. Now key order reads the index's keys zset from
    # the cursor on: a page copies the limit + 1 entries it needs. A store
    # indexed before the keys zset existed gets it filled at open.
    import redis

    n, limit = 10000, 1000
    srv = start_server(args=["--resp-listen", "127.0.0.1:0"], storage=redis_url)
    r = fill_over_resp(srv, n)

    def page_through(server, order: str) -> tuple[list[str], int, int]:
        c0 = entries_copied(server)
        seen, cursor, pages = [], None, 0
        while True:
            q = f"/v1/entries?limit={limit}&sort=key&order={order}" + (f"&cursor={cursor}" if cursor else "")
            page = server.get(q, timeout=60).json()
            seen += [e["key"] for e in page["entries"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                return seen, pages, entries_copied(server) - c0

    for order in ("asc", "desc"):
        seen, pages, copied = page_through(srv, order)
        print(f"\nredis storage, sort=key order={order}: {pages} pages, {copied} entries copied")
        assert len(seen) == n == len(set(seen)) and seen == sorted(seen, reverse=order == "desc")
        assert copied <= pages * (limit + 1), (order, pages, copied)
    # A label filter that matches nothing reads the index once, not per page.
    c0 = entries_copied(srv)
    assert srv.get("/v1/entries?limit=10&sort=key&label_prefix=nothing/", timeout=60).json()["entries"] == []
    assert entries_copied(srv) - c0 == n

    # The keys zset lost (a store from before it): the next server fills it.
    srv.stop()
    direct = redis.Redis(port=redis_server.port, socket_timeout=30)
    assert direct.delete("kcache:{index}:keys") == 1
    srv2 = start_server(storage=redis_url)
    assert direct.zcard("kcache:{index}:keys") == n
    seen, pages, copied = page_through(srv2, "asc")
    assert len(seen) == n and seen == sorted(seen) and copied <= pages * (limit + 1)
