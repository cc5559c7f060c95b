"""A GET waiting on a lease over TLS (single flight): a client that ends its
TLS session (close_notify, Python ssl's unwrap()) mid-wait frees its
connection slot at once, not at the wait's end; a pipelined request that
arrives during the wait is kept and answered after it."""

from __future__ import annotations

import shutil
import socket
import ssl
import threading
import time

import pytest

from harness.pki import pki  # noqa: F401 - the module's certificates, as a fixture
from server_harness import Responses, make_bundle, new_key
from test_tls import client_ctx, https, tls_args

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def metrics(srv, ctx) -> str:
    # Retried: a slot just given back may not be free the moment we ask.
    deadline = time.monotonic() + 10
    while True:
        try:
            status, body = https(srv, ctx, path="/metrics")
            if status == 200:
                return body.decode()
        except (OSError, ssl.SSLError):
            pass
        assert time.monotonic() < deadline, "no /metrics answer"
        time.sleep(0.05)


def wait_for_metric(srv, ctx, line: str, seconds: float, why: str) -> None:
    deadline = time.monotonic() + seconds
    while line not in metrics(srv, ctx):
        assert time.monotonic() < deadline, why
        time.sleep(0.05)


def tls_connect(srv, ctx) -> ssl.SSLSocket:
    raw = socket.create_connection((srv.host, srv.port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def test_a_waiting_get_whose_tls_client_sent_close_notify_gives_its_slot_back(start_server, pki):
    # Before: over TLS the server watched the raw socket with a peek; the
    # close_notify's bytes looked like a next request, the watch stopped,
    # and the GET went on waiting (here 30 s) holding its slot.
    srv = start_server(args=[*tls_args(*pki["server"]), "--max-connections", "5", "--lease-ttl-ms", "60000"])
    ctx = client_ctx(pki["ca"])
    key = new_key()
    assert https(srv, ctx, "POST", f"/v1/leases/{key}")[0] == 201
    waiting = []
    for _ in range(4):
        s = tls_connect(srv, ctx)
        s.sendall(f"GET /v1/artifacts/{key}?wait_ms=30000 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        waiting.append(s)
    wait_for_metric(srv, ctx, "kcache_lease_waiters 4", 10, "the GETs did not start waiting")

    def unwrap(s):
        # close_notify; the server answers with its own once it has read ours.
        s.settimeout(20)
        try:
            s.unwrap().close()
        except (OSError, ssl.SSLError):
            s.close()

    threads = [threading.Thread(target=unwrap, args=(s,)) for s in waiting]
    for t in threads:
        t.start()
    wait_for_metric(srv, ctx, "kcache_lease_waiters 0", 5, "the waiting GETs went on after their clients left")
    for t in threads:
        t.join(25)
    assert "went away while its GET waited" in srv.read_log()
    # Their slots are free: five clients at once are served.
    held = [tls_connect(srv, ctx) for _ in range(5)]
    try:
        for c in held:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for c in held:
            assert Responses(c).next()[0] == 200
    finally:
        for c in held:
            c.close()


def test_a_request_pipelined_behind_a_waiting_tls_get_is_answered_after_it(start_server, pki):
    # The wait reads through the TLS stream; bytes it reads are the next
    # request's and must not be lost.
    srv = start_server(args=[*tls_args(*pki["server"]), "--lease-ttl-ms", "60000"])
    ctx = client_ctx(pki["ca"])
    key = new_key()
    assert https(srv, ctx, "POST", f"/v1/leases/{key}")[0] == 201
    s = tls_connect(srv, ctx)
    try:
        s.sendall(f"GET /v1/artifacts/{key}?wait_ms=30000 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        wait_for_metric(srv, ctx, "kcache_lease_waiters 1", 10, "the GET did not start waiting")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # arrives while the GET waits
        time.sleep(0.3)  # let the server read it, if it reads during the wait
        assert "kcache_lease_waiters 1" in metrics(srv, ctx)  # a live client's bytes do not end the wait
        bundle = make_bundle(key)
        assert https(srv, ctx, "PUT", f"/v1/artifacts/{key}", bundle)[0] == 201
        s.settimeout(10)
        answers = Responses(s)
        assert answers.next() == (200, bundle)
        status, body = answers.next()
        assert status == 200 and b"ok" in body.lower(), body
    finally:
        s.close()
