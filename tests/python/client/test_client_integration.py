"""kcache._core.Client against the real kcache-server: round trips, single
flight across threads and processes, fail-open, trust, fork safety."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from client_harness import REPO, clean_env, make_bundle, new_key, wait_for

HERE = pathlib.Path(__file__).resolve().parent


def dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def test_get_put_round_trip(server, client_for, core, tmp_path):
    key = new_key()
    bundle = make_bundle(key)
    a = client_for(server.url, "node-a")
    b = client_for(server.url, "node-b")
    assert a.get(key) is None
    assert a.put(key, bundle) is True
    assert b.get(key) == bundle
    s = b.stats()
    assert s["server_hits"] == 1 and s["bytes_fetched"] == len(bundle)
    assert s["compile_seconds_saved"] == pytest.approx(1.5)
    # The server hit was published to b's node tier: the next get is local.
    assert (tmp_path / "node-b" / "objects" / key[:2] / key).read_bytes() == bundle
    assert b.get(key) == bundle
    assert b.stats()["node_hits"] == 1
    with pytest.raises(core.KcacheError) as e:
        a.put(key, b"not a bundle")
    assert e.value.code == "bad_magic"
    with pytest.raises(core.KcacheError) as e:
        a.put(new_key(), bundle)  # a bundle for another key
    assert e.value.code == "key_mismatch"
    with pytest.raises(core.KcacheError) as e:
        a.get("NOT-A-KEY")
    assert e.value.code == "invalid_argument"


def test_threads_compile_once_and_the_gil_is_released(start_server, client_for):
    """8 threads, 8 clients with their own node dirs (8 "nodes"): one compile."""
    # A lease TTL far longer than the compile below may take on a loaded machine.
    server = start_server("--lease-ttl-ms", "60000")
    key = new_key()
    bundle = make_bundle(key)
    compiles = []
    results = [None] * 8
    ticks = [0]
    done = threading.Event()
    gil = {}

    def ticker():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    def compile_fn():
        compiles.append(threading.get_ident())
        # While the 7 others wait on the lease in C++, Python must keep
        # running: the ticker advances 50 ticks, and the waiters are all
        # still waiting when it has (a thread holding the GIL through its
        # wait would stop both this thread and the ticker until its wait
        # ended).
        gil["waiting"] = wait_for(lambda: server.metrics().get("kcache_lease_waiters", 0) >= 7, 60)
        start = ticks[0]
        gil["ticked"] = wait_for(lambda: ticks[0] >= start + 50, 60)
        gil["still_waiting"] = server.metrics().get("kcache_lease_waiters", 0) >= 7
        return bundle

    def rank(i):
        c = client_for(server.url, f"node-{i}")
        results[i] = c.get_or_compile(key, compile_fn)

    t = threading.Thread(target=ticker)
    t.start()
    threads = [threading.Thread(target=rank, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=150)
    done.set()
    t.join()
    assert len(compiles) == 1
    assert all(r is not None and r[0] == bundle for r in results)
    sources = sorted(r[1] for r in results)
    assert sources == ["compiled"] + ["server"] * 7
    # Python kept running while 7 threads waited on the lease in C++.
    assert gil == {"waiting": True, "ticked": True, "still_waiting": True}, gil


def test_threads_sharing_a_node_dir_get_it_from_the_node(server, client_for):
    key = new_key()
    bundle = make_bundle(key)
    client = client_for(server.url, "shared")
    compiles = []
    results = []

    def compile_fn():
        compiles.append(1)
        time.sleep(0.3)
        return bundle

    threads = [threading.Thread(target=lambda: results.append(client.get_or_compile(key, compile_fn)))
               for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    assert len(compiles) == 1
    assert sorted(r[1] for r in results) == ["compiled"] + ["node"] * 7
    assert all(r[0] == bundle for r in results)


def test_processes_cold_start_compile_once_per_key(server, tmp_path):
    """16 processes on 4 "nodes" start together on 3 missing keys; the
    callback's subprocess counts compiles. Then a second wave on the same
    nodes downloads nothing from the server."""
    keys = [new_key() for _ in range(3)]
    counter = tmp_path / "compiles.log"

    def wave(tag):
        procs = []
        for i in range(16):
            out = tmp_path / f"{tag}-{i}.json"
            node = tmp_path / f"node-{i % 4}"
            order = keys[i % 3:] + keys[:i % 3]  # ranks start on different keys
            procs.append((subprocess.Popen([sys.executable, str(HERE / "client_worker.py"), server.url, str(node),
                                            str(counter), str(out), *order], env=clean_env()), out))
        outs = []
        for p, out in procs:
            assert p.wait(timeout=60) == 0
            outs.append(json.loads(out.read_text()))
        return outs

    t0 = time.monotonic()
    first = wave("cold")
    print(f"cold wave: {time.monotonic() - t0:.2f} s")
    lines = counter.read_text().split()
    assert sorted(lines) == sorted(keys), "each key compiled exactly once across all processes"
    for key in keys:
        digests = {o["results"][key][1] for o in first}
        assert len(digests) == 1, "every process holds byte-identical artifacts"
    hits_before = server.metrics().get("kcache_cache_hits_total", 0)
    second = wave("warm")
    assert counter.read_text().split() == lines  # no new compile
    assert all(o["results"][k][0] == "node" for o in second for k in keys)
    assert server.metrics().get("kcache_cache_hits_total", 0) == hits_before  # zero server downloads


def test_server_not_running_compiles_locally_at_once(client_for):
    key = new_key()
    c = client_for(dead_url(), "n")
    t0 = time.monotonic()
    data, source = c.get_or_compile(key, lambda: make_bundle(key))
    took = time.monotonic() - t0
    print(f"server not running: local after {took:.3f} s")
    # At once: a refused connection, not the 300 s wait budget (a bound far
    # from it, safe on a loaded machine).
    assert source == "local" and took < 30
    assert c.stats()["breaker"] == "open"
    # The node tier still caches it.
    assert c.get_or_compile(key, lambda: 1 / 0)[1] == "node"


def test_server_killed_while_waiting_on_a_lease(start_server, client_for, tmp_path):
    server = start_server("--lease-ttl-ms", "30000")
    key = new_key()
    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, str(HERE / "lease_holder.py"), server.url, key, str(ready)],
                              env=clean_env())
    try:
        assert wait_for(ready.exists, 10)
        waiter = client_for(server.url, "w", request_timeout_ms=1000)
        result = {}

        def wait_then_compile():
            t0 = time.monotonic()
            result["value"] = waiter.get_or_compile(key, lambda: make_bundle(key))
            result["end"] = time.monotonic()

        th = threading.Thread(target=wait_then_compile)
        th.start()
        assert wait_for(lambda: waiter.stats()["lease_waits"] == 1, 10)
        time.sleep(0.2)
        killed_at = time.monotonic()
        server.kill()
        th.join(timeout=15)
        assert not th.is_alive(), "get_or_compile hung after the server died"
        after = result["end"] - killed_at
        print(f"server killed mid-wait: local compile done {after:.3f} s after the kill")
        assert result["value"][1] == "local"
        assert after < 15  # far below the 30 s lease TTL it would otherwise wait out
    finally:
        holder.kill()
        holder.wait()


def test_lease_holder_killed_another_compiles_after_the_ttl(server, client_for, tmp_path):
    key = new_key()
    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, str(HERE / "lease_holder.py"), server.url, key, str(ready)],
                              env=clean_env())
    assert wait_for(ready.exists, 10)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    t0 = time.monotonic()
    c = client_for(server.url, "n")
    data, source = c.get_or_compile(key, lambda: make_bundle(key))
    took = time.monotonic() - t0
    print(f"lease holder killed: compiled here after {took:.3f} s (lease TTL 1.5 s)")
    assert source == "compiled"
    assert took < 30  # after the 1.5 s TTL, not the 300 s wait budget
    assert c.stats()["lease_waits"] == 1
    # And it was uploaded: another node gets it from the server.
    assert client_for(server.url, "other").get(key) == data


def test_callback_exception_propagates_and_releases_the_lease(server, client_for):
    key = new_key()
    a = client_for(server.url, "a")
    b = client_for(server.url, "b")
    started = threading.Event()
    outcome = {}

    def failing():
        started.set()
        time.sleep(0.3)
        raise ValueError("compiler exploded")

    def run_a():
        try:
            a.get_or_compile(key, failing)
        except ValueError as e:
            outcome["a"] = str(e)

    th = threading.Thread(target=run_a)
    th.start()
    assert started.wait(10)
    released = server.metrics().get("kcache_leases_released_total", 0)
    expired = server.metrics().get("kcache_leases_expired_total", 0)
    # b waits on a's lease; a's failure releases it (the server counts a
    # release, not an expiry of the 1.5 s TTL), and b compiles.
    data, source = b.get_or_compile(key, lambda: make_bundle(key))
    th.join()
    assert outcome["a"] == "compiler exploded"
    assert source == "compiled"
    assert server.metrics().get("kcache_leases_released_total", 0) > released
    assert server.metrics().get("kcache_leases_expired_total", 0) == expired
    assert a.stats()["compile_failures"] == 1


def test_callback_must_return_bytes(server, client_for):
    key = new_key()
    c = client_for(server.url, "n")
    with pytest.raises(TypeError):
        c.get_or_compile(key, lambda: "a string")


def test_corrupt_node_tier_file_is_refused_and_refetched(server, client_for, tmp_path):
    key = new_key()
    bundle = make_bundle(key)
    c = client_for(server.url, "n")
    assert c.get_or_compile(key, lambda: bundle)[1] == "compiled"
    path = tmp_path / "n" / "objects" / key[:2] / key
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    data, source = c.get_or_compile(key, lambda: 1 / 0)
    assert (data, source) == (bundle, "server")
    assert c.stats()["refused"] == 1
    assert path.read_bytes() == bundle  # replaced by the verified copy


def test_untrusted_signature_is_refused_and_compiled_locally(server, client_for, core):
    trusted_priv, trusted_pub = core.generate_signing_key()
    rogue_priv, _ = core.generate_signing_key()
    key = new_key()
    rogue = make_bundle(key, signing_key_pem=rogue_priv)
    assert client_for(server.url, "uploader").put(key, rogue)
    c = client_for(server.url, "n", trusted_keys=[trusted_pub], signing_key=trusted_priv)
    assert c.get(key) is None
    data, source = c.get_or_compile(key, lambda: make_bundle(key))
    assert source == "local"
    assert data != rogue
    assert c.stats()["refused"] == 2
    # What it compiled is signed with its key and trusted on the node.
    assert core.read_bundle(data, expected_key=key, trusted_keys=[trusted_pub], require_signature=True)
    assert c.get_or_compile(key, lambda: 1 / 0)[1] == "node"


def test_fork_child_uses_its_own_connection(server, client_for):
    key = new_key()
    bundle = make_bundle(key)
    c = client_for(server.url, None)  # no node tier: every get goes to the server
    assert c.put(key, bundle)
    assert c.get(key) == bundle  # the pool now holds a connection
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = all(c.get(key) == bundle for _ in range(3))
        finally:
            os._exit(0 if ok else 1)
    for _ in range(20):
        assert c.get(key) == bundle
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert c.get(key) == bundle
    assert c.stats()["server_errors"] == 0


def test_read_only_client_never_leases_or_uploads(server, client_for):
    key = new_key()
    c = client_for(server.url, "n", read_only=True)
    data, source = c.get_or_compile(key, lambda: make_bundle(key))
    assert source == "local"
    assert client_for(server.url, "other").get(key) is None
    m = server.metrics()
    assert m.get("kcache_leases_granted_total", 0) == 0


def test_node_tier_only_and_miss_log(client_for, tmp_path):
    key = new_key()
    c = client_for(None, "n")
    explanation = json.dumps({"key": key, "label": "X", "fields": {"region": {"hash": "ab" * 32}}})
    assert c.get_or_compile(key, lambda: make_bundle(key), explanation)[1] == "compiled"
    assert c.get_or_compile(key, lambda: 1 / 0)[1] == "node"
    lines = [json.loads(x) for x in (tmp_path / "n" / "misses.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["key"] == key
    assert lines[0]["explanation"]["fields"]["region"]["hash"] == "ab" * 32


def test_drop_node_copy_removes_only_that_bundle(client_for, tmp_path):
    """What the compile layer calls for a bundle it refused after loading:
    the node tier forgets it (the next lookup compiles), nothing else."""
    keep, drop = new_key(), new_key()
    c = client_for(None, "n")
    for k in (keep, drop):
        assert c.get_or_compile(k, lambda k=k: make_bundle(k))[1] == "compiled"
    c.drop_node_copy(drop)
    c.drop_node_copy("not-a-key")  # nothing to do, no error
    client_for("http://127.0.0.1:9", None).drop_node_copy(keep)  # no node tier: nothing to do
    assert c.get_or_compile(keep, lambda: 1 / 0)[1] == "node"
    assert c.get_or_compile(drop, lambda: make_bundle(drop))[1] == "compiled"


def test_from_env(server, core, tmp_path):
    key = new_key()
    bundle = make_bundle(key)
    token_file = tmp_path / "token"
    token_file.write_text("not-checked-by-this-server\n")
    env = clean_env(KCACHE_URL=server.url, KCACHE_LOCAL_DIR=str(tmp_path / "env-node"),
                    KCACHE_TOKEN="@" + str(token_file), KCACHE_CLIENT_LOG_LEVEL="error")
    code = ("import sys; from kcache import _core\n"
            "c = _core.Client.from_env()\n"
            "assert c.config['url'] == sys.argv[1], c.config\n"
            "assert c.put(sys.argv[2], open(sys.argv[3], 'rb').read())\n"
            "print(c.stats()['uploads'])\n")
    bpath = tmp_path / "b.kcb"
    bpath.write_bytes(bundle)
    out = subprocess.run([sys.executable, "-c", code, server.url, key, str(bpath)], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    assert "not-checked" not in out.stderr  # the token is never logged
    bad = subprocess.run([sys.executable, "-c", "from kcache import _core; _core.Client.from_env()"],
                         env=clean_env(KCACHE_LOCAL_MAX_BYTES="lots"), capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "KcacheError" in bad.stderr
