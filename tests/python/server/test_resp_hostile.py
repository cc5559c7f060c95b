"""The RESP endpoint against hostile clients, over real sockets to a real
kcache-server: credentials (mTLS never authenticates RESP), floods before
AUTH, trickled and half-sent commands, silent connections, the connection
budget, MGET amplification and metric-label floods. During each, a
legitimate client keeps being answered and the server's memory stays
bounded (docs/operations.md, "Memory bounds")."""

from __future__ import annotations

import os
import socket
import time

import pytest
from harness.pki import pki  # noqa: F401 - the module's certificates, as a fixture
from server_harness import metric_value, read_until_quiet
from test_auth import run_server
from test_tls import tls_args

redis = pytest.importorskip("redis")
TOKENS = {"read": "r" * 24, "write": "w" * 24}
MIB = 1 << 20


def rss(srv) -> int:
    for line in open(f"/proc/{srv.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def cpu_seconds(srv) -> float:
    fields = open(f"/proc/{srv.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def hostile(start_server, tmp_path):
    def start(*extra):
        tokens = tmp_path / "tokens"
        tokens.write_text("".join(f"{t} {role}\n" for role, t in TOKENS.items()))
        return start_server(args=["--resp-listen", "127.0.0.1:0", "--tokens", str(tokens), *extra])
    return start


def resp_socket(srv, timeout=10) -> socket.socket:
    return socket.create_connection(("127.0.0.1", srv.resp_port), timeout=timeout)


def closed_by_server(s: socket.socket, within: float) -> bool:
    """Waits for the server to close `s` (reading whatever it says first)."""
    s.settimeout(within)
    try:
        while s.recv(65536):
            pass
        return True
    except (TimeoutError, socket.timeout):
        return False
    except ConnectionResetError:
        return True


def still_serving(srv):
    assert srv.get("/healthz").status == 200
    writer = redis.Redis(port=srv.resp_port, password=TOKENS["write"], socket_timeout=10)
    assert writer.set("alive", b"yes") and writer.get("alive") == b"yes"


def test_mtls_without_tokens_gives_resp_nothing(pki, tmp_path):  # noqa: F811
    # Before: mTLS counted as authentication for RESP too, which has no
    # certificates; every RESP peer got every role.
    for listen in ("127.0.0.1:0", "0.0.0.0:0"):
        r = run_server(["--listen", "127.0.0.1:0", *tls_args(*pki["server"], pki["clientca"]),
                        "--resp-listen", listen])
        assert r.returncode == 2, r.stderr
        assert b"RESP cannot check" in r.stderr


def test_mtls_with_tokens_makes_resp_authenticate(start_server, pki, tmp_path):  # noqa: F811
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{t} {role}\n" for role, t in TOKENS.items()))
    srv = start_server(args=[*tls_args(*pki["server"], pki["clientca"]), "--tokens", str(tokens),
                             "--resp-listen", "127.0.0.1:0"])
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=srv.resp_port).set("k", b"v")
    assert redis.Redis(port=srv.resp_port, password=TOKENS["write"]).set("k", b"v")


def test_floods_before_auth_are_refused_at_the_header(hostile):
    srv = hostile()
    before = rss(srv)
    for header in (b"*1048576\r\n", b"*2\r\n$3\r\nGET\r\n$536870912\r\n", b"*11\r\n",
                   b"*2\r\n$3\r\nGET\r\n$16385\r\n"):
        with resp_socket(srv) as s:
            s.sendall(header)
            reply = read_until_quiet(s, 5)
            assert reply.startswith(b"-ERR Protocol error"), (header, reply)
    # An unauthenticated client streaming a "value" gets no further than
    # its 16 KiB argument limit: 64 connections x 8 MiB of junk each.
    junk = b"*2\r\n$3\r\nGET\r\n$16000\r\n" + b"x" * 16000 + b"\r\n"
    socks = [resp_socket(srv) for _ in range(64)]
    for s in socks:
        try:
            s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$8388608\r\n" + junk)
        except OSError:
            pass
    for s in socks:
        assert closed_by_server(s, 10)
        s.close()
    assert rss(srv) - before < 32 * MIB
    still_serving(srv)


def test_a_trickled_command_costs_no_recopying(hostile):
    # Before: after every read the parser restarted at the buffer's start
    # and copied every complete argument again (~10 ms per byte after 32 MiB).
    srv = hostile("--read-timeout-ms", "60000")
    with resp_socket(srv) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"AUTH " + TOKENS["write"].encode() + b"\r\n")
        assert s.recv(100) == b"+OK\r\n"
        value = b"v" * (32 * MIB)
        s.sendall(b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % len(value) + value + b"\r\n$200\r\n")
        time.sleep(1.0)  # the 32 MiB are in
        cpu = cpu_seconds(srv)
        for _ in range(200):  # one byte per read after a complete 32 MiB argument
            s.sendall(b"x")
            time.sleep(0.005)
        s.sendall(b"\r\n")
        reply = s.recv(200)
        spent = cpu_seconds(srv) - cpu
    assert reply.startswith(b"-ERR syntax error"), reply  # SET k v <200 x> is not SET's syntax
    # The old parser copied 32 MiB per read: seconds of CPU for these reads.
    assert spent < 1.0, spent
    still_serving(srv)


def test_one_byte_at_a_time_does_not_extend_the_deadline(hostile):
    # --read-timeout-ms is 3000 in the harness. Before: every read re-armed
    # it, so one byte every 2 s kept a half-sent command open for ever.
    srv = hostile()
    with resp_socket(srv) as s:
        start = time.monotonic()
        closed = False
        for b in b"*1\r\n$40\r\n" + b"p" * 40:
            try:
                s.sendall(bytes([b]))
            except OSError:
                closed = True
                break
            if closed_by_server(s, 0.5):
                closed = True
                break
        assert closed, "a trickled command outlived its deadline"
        assert time.monotonic() - start < 10
    still_serving(srv)


def test_a_steady_pipeline_is_never_cut_off(hostile):
    # Positive control for the deadline above: a client whose reads always
    # end mid-command, but complete one command each time, keeps going past
    # --read-timeout-ms (3 s): each command gets its own deadline.
    srv = hostile()
    with resp_socket(srv) as s:
        s.sendall(b"AUTH " + TOKENS["read"].encode() + b"\r\n")
        assert s.recv(100) == b"+OK\r\n"
        s.sendall(b"*1\r\n$4\r\nPI")
        for _ in range(12):  # 6 s
            time.sleep(0.5)
            s.sendall(b"NG\r\n*1\r\n$4\r\nPI")
            assert s.recv(100) == b"+PONG\r\n"
        s.sendall(b"NG\r\n")
        assert s.recv(100) == b"+PONG\r\n"
    still_serving(srv)


def test_idle_connections_time_out_and_busy_ones_stay(hostile):
    srv = hostile("--resp-idle-timeout-ms", "1000")
    silent = resp_socket(srv)
    busy = redis.Redis(port=srv.resp_port, password=TOKENS["read"], socket_timeout=10)
    conn = busy.connection_pool.get_connection()
    # The busy connection pings every 0.2 s, so it is never idle for 1 s, while
    # the silent one (opened first) waits to be closed; then 6 pings more.
    pings, silent_closed = 0, False
    while pings < 200 and not silent_closed:
        conn.send_command("PING")
        assert conn.read_response() in (b"PONG", "PONG", True)
        pings += 1
        silent_closed = closed_by_server(silent, 0.2)
    assert silent_closed, "an idle RESP connection was never closed"
    for _ in range(6):
        conn.send_command("PING")
        assert conn.read_response() in (b"PONG", "PONG", True)
        time.sleep(0.2)
    silent.close()
    assert "timed out" in srv.read_log()


def test_unauthenticated_connections_are_closed_at_the_auth_deadline(hostile):
    """--resp-auth-timeout-ms bounds a connection's life before AUTH, silent
    or chatty, while the idle timeout (10 min here) would keep it; an
    authenticated connection opened at the same moment stays (the positive
    control that the deadline is about authentication, not age)."""
    srv = hostile("--resp-auth-timeout-ms", "1000", "--resp-idle-timeout-ms", "600000")
    silent, chatty = resp_socket(srv), resp_socket(srv)
    authed = redis.Redis(port=srv.resp_port, password=TOKENS["read"], socket_timeout=10)
    assert authed.ping()
    chatty.settimeout(0.2)
    chatty_closed = False
    deadline = time.monotonic() + 30  # a generous bound on the event, not a measured duration
    while time.monotonic() < deadline:  # PING without AUTH, about every 0.2 s, until closed
        time.sleep(0.2)
        try:
            chatty.sendall(b"*1\r\n$4\r\nPING\r\n")
            if chatty.recv(65536) == b"":
                chatty_closed = True
        except (TimeoutError, socket.timeout):
            pass
        except (BrokenPipeError, ConnectionResetError):
            chatty_closed = True
        if chatty_closed:
            break
    assert chatty_closed, "an unauthenticated connection that kept talking was never closed"
    assert closed_by_server(silent, 30), "a silent unauthenticated connection was never closed"
    assert authed.ping()  # as old as the closed ones, and authenticated: still served
    assert metric_value(srv, "kcache_resp_auth_timeouts_total") == 2
    assert srv.read_log().count("not authenticated within 1000 ms") == 2
    silent.close()
    chatty.close()


def test_resp_has_its_own_connection_budget(hostile):
    # Before: 16 silent RESP sockets made /healthz answer 503.
    srv = hostile("--max-connections", "4", "--resp-max-connections", "4")
    held = [resp_socket(srv) for _ in range(4)]
    time.sleep(0.2)
    extra = resp_socket(srv)
    assert closed_by_server(extra, 5), "a RESP connection over its budget was served"
    for _ in range(3):
        assert srv.get("/healthz").status == 200
    for s in held:
        s.close()
    time.sleep(0.2)
    still_serving(srv)


def test_mget_cannot_amplify_one_value_into_a_huge_reply(hostile):
    srv = hostile()
    writer = redis.Redis(port=srv.resp_port, password=TOKENS["write"], socket_timeout=30)
    reader = redis.Redis(port=srv.resp_port, password=TOKENS["read"], socket_timeout=30)
    writer.set("big", b"b" * (4 * MIB))
    assert reader.mget(["big"] * 8) == [b"b" * (4 * MIB)] * 8  # 32 MiB: allowed
    before = rss(srv)
    with pytest.raises(redis.ResponseError, match="MGET reply would exceed"):
        reader.mget(["big"] * 48)
    assert rss(srv) - before < 96 * MIB
    still_serving(srv)


def test_client_bytes_never_become_metric_labels(hostile):
    srv = hostile()
    size = len(srv.get("/metrics").body)
    for i in range(60):
        with srv.connect() as s:
            s.sendall(b"M%dETHOD%s / HTTP/1.1\r\nHost: x\r\n\r\n" % (i, b"Z" * 900))
            read_until_quiet(s, 2)
    writer = redis.Redis(port=srv.resp_port, password=TOKENS["write"])
    for i in range(60):
        writer.set(f"family{i}-{'q' * 40}:key", b"v")
        writer.set(f"pt2:family{i}::key", b"v")
    metrics = srv.get("/metrics").body.decode()
    assert len(metrics) - size < 4000, len(metrics) - size
    assert 'method="other"' in metrics
    assert 'type="other",result="stored"} 60' in metrics
    assert 'type="pt2:other",result="stored"} 60' in metrics
    assert "family" not in metrics and "ETHOD" not in metrics


def test_single_flight_windows_are_capped(hostile):
    # Before: every GET miss of a writer on a pt2:fx-graph key opened a
    # window (a table entry for --resp-flight-window-ms), however many. Past
    # --max-leases windows a miss is a plain miss: nobody is made to wait.
    srv = hostile("--max-leases", "3", "--resp-flight-window-ms", "30000")
    writer = redis.Redis(port=srv.resp_port, password=TOKENS["write"], socket_timeout=10)
    keys = [f"pt2:fx-graph-v1::{i:064x}" for i in range(6)]
    for k in keys:
        assert writer.get(k) is None
    other = redis.Redis(port=srv.resp_port, password=TOKENS["write"], socket_timeout=10)
    t = time.monotonic()
    assert other.get(keys[5]) is None  # no window on it: answered at once
    assert time.monotonic() - t < 2
    metrics = srv.get("/metrics").body.decode()
    compiler = [l for l in metrics.splitlines() if 'result="miss_compiler"' in l and "fx-graph" in l]
    assert compiler and compiler[0].endswith(" 3"), compiler
    still_serving(srv)


def test_keys_with_an_expiry_are_capped_and_swept(hostile):
    # Before: every SET with EX/PX added to an in-memory map that only a
    # later read of that very key emptied. Past --resp-max-expiries such a
    # SET is refused (nothing stored); expired keys are dropped every
    # second, from storage too, read or not.
    srv = hostile("--resp-max-expiries", "4")
    writer = redis.Redis(port=srv.resp_port, password=TOKENS["write"], socket_timeout=10)
    for i in range(4):
        assert writer.set(f"short{i}", b"v", px=3000)  # seconds of margin for the checks below
    with pytest.raises(redis.ResponseError, match="resp-max-expiries"):
        writer.set("refused", b"v", ex=100)
    assert writer.get("refused") is None
    assert writer.set("no-expiry", b"kept")  # a SET without an expiry needs no room
    assert writer.set("short0", b"again", px=3000)  # a key that has an expiry keeps its place
    auth = {"Authorization": f"Bearer {TOKENS['read']}"}
    entries = lambda: srv.get("/v1/stats", headers=auth).json()["storage"]["entries"]  # noqa: E731
    assert entries() == 5
    deadline = time.monotonic() + 20
    while entries() != 1:  # nobody reads the short keys: the sweep removes them
        assert time.monotonic() < deadline, entries()
        time.sleep(0.2)
    assert writer.set("later", b"v", ex=100)  # room again
    assert writer.get("no-expiry") == b"kept" and writer.get("later") == b"v"
    still_serving(srv)


def resp_command(*args: str) -> bytes:
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


def wait_for_metric(srv, line: str, seconds: float, why: str) -> None:
    deadline = time.monotonic() + seconds
    while line not in srv.get("/metrics").body.decode():
        assert time.monotonic() < deadline, why
        time.sleep(0.05)


def test_a_get_waiting_in_a_window_whose_client_left_frees_its_connection(hostile):
    # Before: a GET waiting in a single-flight window held its connection
    # (one of --resp-max-connections) until the window ended — here 60 s —
    # or the SET landed, however soon its client went away.
    srv = hostile("--resp-max-connections", "5", "--resp-flight-window-ms", "60000")
    key = "pt2:fx-graph-v1::" + "ab" * 32
    compiler = redis.Redis(port=srv.resp_port, password=TOKENS["write"], socket_timeout=10)
    assert compiler.get(key) is None  # it compiles; the window is open
    waiting = []
    for _ in range(4):  # the rest of the budget
        s = resp_socket(srv)
        s.sendall(resp_command("AUTH", TOKENS["read"]) + resp_command("GET", key))
        waiting.append(s)
    wait_for_metric(srv, "kcache_lease_waiters 4", 10, "the GETs did not start waiting")
    for s in waiting:
        s.close()
    wait_for_metric(srv, "kcache_lease_waiters 0", 5, "the waiting GETs went on after their clients left")
    metrics = srv.get("/metrics").body.decode()
    gone = [l for l in metrics.splitlines() if 'command="get"' in l and 'result="client_gone"' in l]
    assert gone and gone[0].endswith(" 4"), gone
    assert "went away while its GET waited" in srv.read_log()
    # The budget is back: four new connections are served (over it they
    # would be closed unanswered).
    fresh = [redis.Redis(port=srv.resp_port, password=TOKENS["read"], socket_timeout=10) for _ in range(4)]
    deadline = time.monotonic() + 5
    for r in fresh:
        while True:  # a closed session leaves the budget a moment after its socket
            try:
                assert r.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "the budget did not come back"
                time.sleep(0.05)
    for r in fresh:
        r.close()
    # The compiler's SET still lands.
    assert compiler.set(key, b"compiled") and compiler.get(key) == b"compiled"


def test_commands_pipelined_behind_a_waiting_get_are_answered_after_it(hostile):
    # The wait reads the connection; what it reads is the client's next
    # commands and must be run after the GET, not lost.
    srv = hostile("--resp-flight-window-ms", "60000")
    key = "pt2:fx-graph-v1::" + "cd" * 32
    compiler = redis.Redis(port=srv.resp_port, password=TOKENS["write"], socket_timeout=10)
    assert compiler.get(key) is None
    s = resp_socket(srv)
    try:
        s.sendall(resp_command("AUTH", TOKENS["read"]) + resp_command("GET", key))
        wait_for_metric(srv, "kcache_lease_waiters 1", 10, "the GET did not start waiting")
        s.sendall(resp_command("PING") + resp_command("ECHO", "after"))  # while the GET waits
        time.sleep(0.3)
        assert "kcache_lease_waiters 1" in srv.get("/metrics").body.decode()  # a live client still waits
        assert compiler.set(key, b"compiled")
        want = b"+OK\r\n$8\r\ncompiled\r\n+PONG\r\n$5\r\nafter\r\n"
        got = b""
        s.settimeout(10)
        while len(got) < len(want):
            chunk = s.recv(65536)
            assert chunk, got
            got += chunk
        assert got == want
    finally:
        s.close()
