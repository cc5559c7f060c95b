"""Startup configuration, connection limits, graceful drain, persistence and
crash safety of the real binary."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from server_harness import SERVER_BIN, KcacheServer, make_bundle, new_key, read_until_quiet, status_of


def test_port_zero_prints_bound_port(start_server):
    srv = start_server()
    assert srv.host == "127.0.0.1" and srv.port > 0
    assert srv.get("/healthz").status == 200


def test_env_and_config_file_precedence(start_server, tmp_path):
    cfg = tmp_path / "kcache.conf"
    cfg.write_text("# comment\nlease-ttl-ms = 2345\nmax-body-bytes = 1M\n")
    srv = start_server(args=["--config", str(cfg)])
    assert srv.request("POST", f"/v1/leases/{new_key()}").json()["ttl_ms"] == 2345
    srv2 = start_server(args=["--config", str(cfg)], env={"KCACHE_LEASE_TTL_MS": "3456"})
    assert srv2.request("POST", f"/v1/leases/{new_key()}").json()["ttl_ms"] == 3456
    srv3 = start_server(args=["--config", str(cfg), "--lease-ttl-ms", "4567"], env={"KCACHE_LEASE_TTL_MS": "3456"})
    assert srv3.request("POST", f"/v1/leases/{new_key()}").json()["ttl_ms"] == 4567
    jcfg = tmp_path / "kcache.json"
    jcfg.write_text(json.dumps({"lease-ttl-ms": 5678, "max-bytes": "20G"}))
    srv4 = start_server(env={"KCACHE_CONFIG": str(jcfg)})
    assert srv4.request("POST", f"/v1/leases/{new_key()}").json()["ttl_ms"] == 5678
    assert srv4.get("/v1/stats").json()["storage"]["capacity_bytes"] == 20 << 30


def test_env_listen_and_storage(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCACHE_")}
    env.update({"KCACHE_LISTEN": "127.0.0.1:0", "KCACHE_STORAGE": f"disk:{tmp_path / 'data'}",
                "KCACHE_MAX_BYTES": "500M"})
    p = subprocess.Popen([str(SERVER_BIN)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        line = p.stdout.readline().decode()
        assert line.startswith("listening on 127.0.0.1:")
        import http.client
        host, port = line.split()[-1].rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=5)
        c.request("GET", "/v1/stats")
        stats = json.loads(c.getresponse().read())
        assert stats["backend"] == "disk" and stats["storage"]["capacity_bytes"] == 500 << 20
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0


@pytest.mark.parametrize("args,needle", [
    (["--max-bytes", "lots"], "not a size"),
    (["--listen", "nowhere"], "HOST:PORT"),
    (["--lease-ttl-ms", "-1"], "lease-ttl-ms"),
    (["--storage", "ftp://x"], "unknown storage"),
    (["--no-such-flag"], "no-such-flag"),
    (["--listen", "0.0.0.0:0"], "non-loopback"),
])
def test_bad_configuration_exits_nonzero(args, needle):
    p = subprocess.run([str(SERVER_BIN), "--storage", "memory:", *args], capture_output=True, timeout=10)
    assert p.returncode in (1, 2)
    assert needle in p.stderr.decode(), p.stderr.decode()


def test_help_exits_zero():
    p = subprocess.run([str(SERVER_BIN), "--help"], capture_output=True, timeout=10)
    assert p.returncode == 0 and b"--listen" in p.stdout and b"KCACHE_LISTEN" in p.stdout


def test_max_connections_503_with_retry_after(start_server):
    srv = start_server(args=["--max-connections", "2"])
    a, b = srv.connect(), srv.connect()
    try:
        time.sleep(0.2)
        with srv.connect() as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            raw = read_until_quiet(c, 5)
        assert status_of(raw) == 503
        assert b"retry-after: 1" in raw.lower()
        assert b"too_many_connections" in raw
    finally:
        a.close()
        b.close()
    time.sleep(0.3)
    assert srv.get("/healthz").status == 200
    assert srv.get("/v1/stats").json()["connections"]["rejected"] == 1


def test_sigterm_drains_in_flight_and_exits_zero(tmp_path):
    env = {"KCACHE_FAULT_PAUSE_PUT_MS": "800"}  # every put takes 0.8 s
    # A long drain timeout: an idle connection that held the drain up would
    # keep the server for 60 s, far from anything a loaded machine causes.
    srv = KcacheServer(tmp_path, storage=f"disk:{tmp_path / 'data'}", env=env,
                       args=["--drain-timeout-ms", "60000"])
    key = new_key()
    bundle = make_bundle(key)
    out = {}

    def upload():
        out["put"] = srv.put_artifact(key, bundle)

    wkey = new_key()
    srv.request("POST", f"/v1/leases/{wkey}")

    def waiter():
        out["wait"] = srv.get(f"/v1/artifacts/{wkey}?wait_ms=30000")

    threads = [threading.Thread(target=upload), threading.Thread(target=waiter)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    idle = srv.connect()  # an idle keep-alive connection must not hold the drain up
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(90)
    code = srv.proc.wait(90)
    took = time.monotonic() - t0
    idle.close()
    srv.log.close()
    assert code == 0
    assert out["put"].status == 201  # the in-flight upload finished
    assert out["wait"].status == 503 and out["wait"].json()["error"] == "shutting_down"
    assert took < 30
    # And it is durable: a restart serves it.
    srv2 = KcacheServer(tmp_path, storage=f"disk:{tmp_path / 'data'}")
    try:
        assert srv2.get(f"/v1/artifacts/{key}").body == bundle
    finally:
        assert srv2.stop() == 0


def test_kill9_during_100_uploads_leaves_entries_whole_or_absent(tmp_path):
    data = tmp_path / "data"
    env = {"KCACHE_FAULT_PAUSE_PUT_MS": "1500"}
    srv = KcacheServer(tmp_path, storage=f"disk:{data}", env=env, args=["--storage-threads", "8"])
    bundles = {}
    for i in range(100):
        k = new_key()
        bundles[k] = make_bundle(k, payload=os.urandom(2000 + i * 37))

    def upload(k):
        try:
            return srv.put_artifact(k, bundles[k]).status
        except Exception:
            return None

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=100)
    futs = {k: pool.submit(upload, k) for k in bundles}
    time.sleep(2.2)  # the first 8 published, the next 8 paused mid-put
    temp_files = [p for p in data.rglob("*") if p.is_file() and "tmp" in str(p.relative_to(data)).lower()]
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(10)
    srv.log.close()
    statuses = [f.result() for f in futs.values()]
    pool.shutdown()
    acknowledged = [k for k, f in futs.items() if f.result() == 201]
    print(f"\nkill -9: {len(acknowledged)} uploads acknowledged, {len(temp_files)} temp files mid-put at the kill")
    assert temp_files, "the fault hook should have held some puts between write and publish"
    assert 0 < len(acknowledged) < 100, statuses

    srv2 = KcacheServer(tmp_path, storage=f"disk:{data}")
    try:
        present = 0
        for k, b in bundles.items():
            r = srv2.get(f"/v1/artifacts/{k}")
            assert r.status in (200, 404)
            if r.status == 200:
                assert r.body == b  # complete, byte for byte
                present += 1
            else:
                assert k not in acknowledged, "an acknowledged upload was lost"
        v = srv2.request("POST", "/v1/verify").json()
        assert v["corrupt"] == [] and v["checked"] == present
        print(f"after restart: {present} entries present and verified, {100 - present} absent")
    finally:
        assert srv2.stop() == 0
