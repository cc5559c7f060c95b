"""Resharding under load (issue 21): two kcache-server replicas on a real
Redis Cluster (three masters, three replicas, loopback) serve GETs of stored
entries, PUTs of new ones and lease calls from several threads while a
fourth master is added (`redis-cli --cluster add-node`) and slots are moved
to it:

1. in bulk, with `redis-cli --cluster reshard --cluster-from all` (its
   defaults: ten keys per MIGRATE), 1,024 of the 16,384 slots;
2. by hand, the way redis-cli does it but one key per MIGRATE with a pause
   after each (CLUSTER SETSLOT IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE):
   the slots of several stored multi-chunk entries, of the LRU index
   ({index}) and of the leases ({leases}). Each of these slots is split
   between its two masters for a while (an entry's meta already on the new
   master, its chunks still on the old one, or the other way round), as a
   large slot is in a real reshard, where one MIGRATE batch of ten keys
   does not hold all of a slot's keys. Meanwhile a "chaser" thread reads the
   entries of the slot being moved and uploads new keys into it.

What it asserts:
- no GET of a stored key (one answered 201, or preloaded) misses or fails,
  during or after the moves, through either server, and none returns wrong
  bytes;
- every PUT is answered 201 (the ones into a slot mid-migration too), and
  every lease call succeeds;
- ASK redirects were followed and counted
  (`kcache_redis_cluster_redirects_total{kind="ask"}` in /metrics), and
  MOVED redirects too (the servers' maps were stale after each move);
- afterwards the cluster is consistent (`redis-cli --cluster check`), the
  new master serves slots and holds entries, and every stored entry reads
  back identical.

KCACHE_RESHARD_REPORT=path appends the figures as one JSON line.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest

from cluster_harness import REDIS_CLI, RedisCluster, cli, key_slot, meta_key
from server_harness import REDIS, make_bundle, new_key

pytestmark = pytest.mark.skipif(REDIS is None or REDIS_CLI is None, reason="redis-server / redis-cli not installed")

PRELOAD = 48
BULK_SLOTS = 1024  # moved by redis-cli --cluster reshard
HAND_ENTRIES = 6  # multi-chunk entries whose slots are moved by hand, key by key
PAUSE_S = 0.05  # after each key moved by hand
READERS = 2


def key_in_slot(slot: int, rng: random.Random) -> str:
    """A new 64-hex-digit kcache key whose entry lands in `slot`."""
    while True:
        k = rng.randbytes(32).hex()
        if key_slot(meta_key(k)) == slot:
            return k


def metric(srv, name: str) -> float:
    for line in srv.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


class Load:
    """Readers GET stored keys; a writer PUTs new keys and takes and releases
    leases; a chaser reads the entries of the slot being moved by hand and
    uploads new keys into it. Every call is recorded."""

    def __init__(self, servers, stored: dict[str, bytes]) -> None:
        self.servers = servers
        self.stored = stored  # key -> bundle: preloaded, or answered 201
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.calls: list[tuple[float, str, int | str, str]] = []  # start, op, status, detail
        self.wrong: list[str] = []
        self.chase: tuple[int, list[str]] | None = None  # slot being moved by hand, its stored keys
        self.chase_gets = 0
        self.chase_puts = 0
        self.threads = [threading.Thread(target=self._reader, args=(i,), daemon=True) for i in range(READERS)]
        self.threads.append(threading.Thread(target=self._writer, daemon=True))
        self.threads.append(threading.Thread(target=self._chaser, daemon=True))

    def _record(self, op: str, fn) -> object:
        t0 = time.monotonic()
        try:
            r = fn()
            status, detail = r.status, ("" if r.status < 400 else r.body[:200].decode(errors="replace"))
        except OSError as e:
            r, status, detail = None, "exception", repr(e)
        with self.lock:
            self.calls.append((t0, op, status, detail))
        return r

    def _get(self, srv, key: str, op: str = "get") -> None:
        with self.lock:
            want = self.stored[key]
        r = self._record(op, lambda: srv.get(f"/v1/artifacts/{key}", timeout=15))
        if r is not None and r.status == 200 and r.body != want:
            with self.lock:
                self.wrong.append(key)

    def _put(self, srv, key: str, bundle: bytes, op: str = "put") -> None:
        r = self._record(op, lambda: srv.put_artifact(key, bundle))
        if r is not None and r.status == 201:
            with self.lock:
                self.stored[key] = bundle

    def _reader(self, i: int) -> None:
        rng = random.Random(i)
        n = 0
        while not self.stop.is_set():
            n += 1
            with self.lock:
                key = rng.choice(list(self.stored))
            self._get(self.servers[n % 2], key)

    def _writer(self) -> None:
        rng = random.Random(100)
        n = 0
        while not self.stop.is_set():
            n += 1
            srv = self.servers[n % 2]
            key = new_key()
            size = rng.choice([30_000, 300_000, 2_200_000])
            self._put(srv, key, make_bundle(key, payload=rng.randbytes(size)))
            lk = new_key()
            r = self._record("lease", lambda: srv.request("POST", f"/v1/leases/{lk}", timeout=15))
            if r is not None and r.status == 201:
                token = r.json()["lease"]
                self._record("release", lambda: self.servers[(n + 1) % 2].request(
                    "DELETE", f"/v1/leases/{lk}", headers={"X-Kcache-Lease": token}, timeout=15))

    def _chaser(self) -> None:
        rng = random.Random(200)
        n = 0
        while not self.stop.is_set():
            chase = self.chase
            if chase is None:
                time.sleep(0.005)
                continue
            slot, keys = chase
            n += 1
            for key in keys:
                n += 1
                self._get(self.servers[n % 2], key, op="chase_get")
                self.chase_gets += 1
            if n % 4 == 0:  # a new entry into the slot mid-migration, now and then
                key = key_in_slot(slot, rng)
                self._put(self.servers[n % 2], key, make_bundle(key, payload=rng.randbytes(1_200_000)),
                          op="chase_put")
                self.chase_puts += 1

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        assert not any(t.is_alive() for t in self.threads), "a load thread hung"


def redirects(servers) -> dict[str, float]:
    out = {}
    for kind in ("ask", "moved"):
        out[kind] = sum(metric(s, f'kcache_redis_cluster_redirects_total{{kind="{kind}"}}') for s in servers)
    for reason in ("tryagain", "clusterdown", "node_error"):
        out[reason] = sum(metric(s, f'kcache_redis_cluster_retries_total{{reason="{reason}"}}') for s in servers)
    out["failed_calls"] = sum(metric(s, "kcache_redis_cluster_failed_calls_total") for s in servers)
    return out


def test_reshard_to_a_new_master_under_load(start_server, tmp_path):
    t_begin = time.monotonic()
    cluster = RedisCluster(tmp_path / "cluster")
    try:
        run(cluster, start_server, t_begin)
    finally:
        cluster.stop()


def run(cluster: RedisCluster, start_server, t_begin: float) -> None:
    old_masters = cluster.masters()
    assert len(old_masters) == 3
    servers = [start_server(storage=cluster.url(first)) for first in old_masters[:2]]

    # Preload: multi-chunk entries (3 chunks of 1 MiB) and small ones.
    rng = random.Random(7)
    stored: dict[str, bytes] = {}
    big: list[str] = []
    for i in range(PRELOAD):
        key = new_key()
        size = 2_200_000 if i % 2 == 0 else 40_000
        bundle = make_bundle(key, payload=rng.randbytes(size))
        assert servers[i % 2].put_artifact(key, bundle).status == 201
        stored[key] = bundle
        if size > 1_000_000:
            big.append(key)

    load = Load(servers, stored)
    load.start()
    time.sleep(1.0)
    t_load = time.monotonic()

    new = cluster.add_master()
    new_id = cluster.node_id(new)
    t_added = time.monotonic()

    bulk = cluster.cluster_cli("reshard", f"127.0.0.1:{old_masters[0]}", "--cluster-from", "all",
                               "--cluster-to", new_id, "--cluster-slots", str(BULK_SLOTS), "--cluster-yes")
    assert bulk.returncode == 0, bulk.stdout[-3000:] + bulk.stderr[-3000:]
    t_bulk = time.monotonic()

    # By hand, key by key: the slots of stored multi-chunk entries still on
    # the old masters, then the index's and the leases' slots.
    by_slot: dict[int, list[str]] = {}
    for key in big:
        s = key_slot(meta_key(key))
        if cluster.owner(s, via=new) != new and len(by_slot) < HAND_ENTRIES:
            by_slot.setdefault(s, []).append(key)
    assert len(by_slot) == HAND_ENTRIES
    hand = list(by_slot.items())
    for special in ("kcache:{index}:lru", "kcache:{leases}:x"):
        s = key_slot(special)
        if cluster.owner(s, via=new) != new and s not in by_slot:
            hand.append((s, []))
    keys_moved_by_hand = 0
    masters = cluster.masters()
    for slot, keys in hand:
        src = cluster.owner(slot, via=new)
        with load.lock:
            stored_in_slot = [k for k in load.stored if key_slot(meta_key(k)) == slot]
        load.chase = (slot, stored_in_slot or keys)
        keys_moved_by_hand += cluster.move_slot(slot, src, new, pause_s=PAUSE_S, masters=masters)
        load.chase = None
        assert cluster.owner(slot, via=new) == new
    t_hand = time.monotonic()
    time.sleep(1.0)  # the servers keep answering after the last move
    load.finish()

    counts = redirects(servers)
    calls = load.calls
    gets = [c for c in calls if c[1] in ("get", "chase_get")]
    bad_gets = [c for c in gets if c[2] != 200]
    puts = [c for c in calls if c[1] in ("put", "chase_put")]
    bad_puts = [c for c in puts if c[2] != 201]
    leases = [c for c in calls if c[1] in ("lease", "release")]
    bad_leases = [c for c in leases if c[2] not in (201, 204)]

    report = {
        "preloaded": PRELOAD, "bulk_slots": BULK_SLOTS, "hand_slots": len(hand),
        "keys_moved_by_hand": keys_moved_by_hand, "pause_s": PAUSE_S,
        "add_node_s": round(t_added - t_load, 2), "bulk_reshard_s": round(t_bulk - t_added, 2),
        "hand_moves_s": round(t_hand - t_bulk, 2), "test_s": round(time.monotonic() - t_begin, 2),
        "gets": len(gets), "chase_gets": load.chase_gets, "bad_gets": len(bad_gets),
        "puts": len(puts), "chase_puts": load.chase_puts, "bad_puts": len(bad_puts),
        "lease_calls": len(leases), "bad_lease_calls": len(bad_leases), **counts,
    }
    print(json.dumps(report))
    if path := os.environ.get("KCACHE_RESHARD_REPORT"):
        with open(path, "a") as f:
            f.write(json.dumps(report) + "\n")

    assert not load.wrong, f"wrong bytes for {load.wrong[:3]}"
    assert not bad_gets, f"{len(bad_gets)} of {len(gets)} GETs of stored keys did not hit: {bad_gets[:5]}"
    assert not bad_puts, f"{len(bad_puts)} of {len(puts)} PUTs not stored: {bad_puts[:5]}"
    assert not bad_leases, f"{len(bad_leases)} of {len(leases)} lease calls failed: {bad_leases[:5]}"
    assert load.chase_gets >= 1 and load.chase_puts >= 1, report  # the slots mid-move were read and written
    assert counts["ask"] >= 1, f"no ASK redirect counted: {counts}"
    assert counts["moved"] >= 1, f"no MOVED redirect counted: {counts}"
    assert counts["failed_calls"] == 0, counts

    cluster.wait_agreed()  # every slot covered, every node agreeing (raises otherwise)
    assert int(cli(new, "DBSIZE")) > 0
    for i, (key, bundle) in enumerate(sorted(load.stored.items())):
        r = servers[i % 2].get(f"/v1/artifacts/{key}", timeout=15)
        assert r.status == 200 and r.body == bundle, (key, r.status, r.body[:200])
