"""RESP GETs answered from the hot tier (server/resp/resp_hot.hpp): a value
read once is answered on the connection's strand after that (the server's
own kcache_hot_tier_hits_total counts it), and nothing the hot tier keeps is
ever served after a SET replaced it, a DEL removed it or its expiry passed."""

from __future__ import annotations

import threading
import time

import pytest

redis = pytest.importorskip("redis")


def hot_hits(srv, api: str = "resp") -> float:
    want = f'kcache_hot_tier_hits_total{{api="{api}"}} '
    for line in srv.get("/metrics").body.decode().splitlines():
        if line.startswith(want):
            return float(line.split()[1])
    raise AssertionError("kcache_hot_tier_hits_total not in /metrics")


@pytest.fixture(params=["memory:", "disk"])
def resp_hot(request, start_server, tmp_path):
    storage = f"disk:{tmp_path}/d" if request.param == "disk" else request.param
    srv = start_server(storage=storage, args=["--resp-listen", "127.0.0.1:0"])
    return srv, redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=10)


def test_a_value_read_once_is_answered_from_the_hot_tier(resp_hot):
    srv, r = resp_hot
    r.set("k", b"v" * 1000)
    assert r.get("k") == b"v" * 1000  # from storage: fills the tier
    assert hot_hits(srv) == 0  # positive control: the first read was not hot
    for _ in range(5):
        assert r.get("k") == b"v" * 1000
    assert hot_hits(srv) == 5
    # Pipelined GETs (the batched path) are answered hot too.
    pipe = r.pipeline(transaction=False)
    for _ in range(4):
        pipe.get("k")
    assert pipe.execute() == [b"v" * 1000] * 4
    assert hot_hits(srv) == 9


def test_replaced_and_deleted_values_leave_the_hot_tier(resp_hot):
    srv, r = resp_hot
    r.set("k", "v1")
    assert r.get("k") == b"v1" and r.get("k") == b"v1"
    assert hot_hits(srv) == 1
    r.set("k", "v2")
    assert r.get("k") == b"v2"
    assert r.get("k") == b"v2"  # hot again, with the new value
    assert r.delete("k") == 1
    assert r.get("k") is None
    assert r.mget("k") == [None]


def test_values_with_an_expiry_are_never_hot(resp_hot):
    srv, r = resp_hot
    r.set("t", "v", px=1500)
    before = hot_hits(srv)
    assert r.get("t") == b"v" and r.get("t") == b"v"
    assert hot_hits(srv) == before  # read from storage each time, where the expiry is checked
    deadline = time.monotonic() + 30
    while r.get("t") is not None:
        assert time.monotonic() < deadline, "an expired value was still served"
        time.sleep(0.1)
    # A hot value that gets an expiry by a later SET leaves the tier.
    r.set("u", "v1")
    r.get("u")
    r.get("u")
    r.set("u", "v2", px=1500)
    assert r.get("u") == b"v2"
    while r.get("u") is not None:
        assert time.monotonic() < deadline + 30, "an expired value was still served"
        time.sleep(0.1)


def test_a_reader_never_sees_a_value_older_than_the_last_acknowledged_set(resp_hot):
    """Readers race a writer that replaces one key: every read after a SET
    was acknowledged returns that SET's value or a later one. (A read
    during a replace may be null: kcache removes the old value, then stores
    the new one, docs/protocol.md; counted, not a failure.)"""
    srv, w = resp_hot
    acked = [0]
    stop = threading.Event()
    stale: list[tuple[int, int]] = []
    nulls = [0]
    w.set("race", "0")

    def reader():
        r = redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=10)
        while not stop.is_set():
            floor = acked[0]
            value = r.get("race")
            if value is None:
                nulls[0] += 1
                continue
            got = int(value)
            if got < floor:
                stale.append((got, floor))

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for n in range(1, 600):
            w.set("race", str(n))
            acked[0] = n
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not stale, stale[:10]
    assert hot_hits(srv) > 0  # the readers did go through the hot tier


def test_a_read_that_raced_a_replace_does_not_bring_the_old_value_back(start_server, tmp_path):
    """A GET reads v1 from disk and pauses (KCACHE_FAULT_PAUSE_READ_MS)
    while a SET replaces it with v2 and is acknowledged; when the paused read
    ends it must not fill the hot tier with v1 (HotTier::put's generation
    check: without it every later GET answers v1)."""
    srv = start_server(storage=f"disk:{tmp_path}/d", args=["--resp-listen", "127.0.0.1:0"],
                       env={"KCACHE_FAULT_PAUSE_READ_MS": "2000"})
    w = redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=30)
    w.set("k", "v1")
    got: list[bytes | None] = []
    reader = threading.Thread(target=lambda: got.append(
        redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=30).get("k")))
    reader.start()
    deadline = time.monotonic() + 60
    while "paused" not in srv.read_log().split("KCACHE_FAULT_PAUSE_READ_MS", 1)[-1]:
        assert time.monotonic() < deadline, "the reader's read never began"
        time.sleep(0.02)
    w.set("k", "v2")  # acknowledged while the first read is paused
    reader.join(60)
    assert got == [b"v1"]  # positive control: the raced read did read the old value
    # Every later read: v2 (the first from storage, pausing too; then hot).
    assert w.get("k") == b"v2"
    assert w.get("k") == b"v2"
    assert hot_hits(srv) >= 1
