"""The client's transport against small Python servers: TLS and mTLS, a
server that answers 500, and one that accepts and never answers."""

from __future__ import annotations

import http.server
import socket
import ssl
import subprocess
import threading
import time

import pytest

from client_harness import make_bundle, new_key


def openssl(*args: str, cwd) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=kcache test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)
    return d


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    status = 404
    seen: list[str] = []

    def _answer(self):
        type(self).seen.append(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        body = b'{"error":"x","message":"scripted"}'
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args):
        pass


def serve(status: int = 404, tls: ssl.SSLContext | None = None):
    handler = type("H", (_Handler,), {"status": status, "seen": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, handler


def tls_context(pki, require_client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki / "server.pem", pki / "server.key")
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(pki / "ca.pem")
    return ctx


def test_https_with_a_ca_file(pki, client_for):
    httpd, handler = serve(tls=tls_context(pki, False))
    try:
        url = f"https://127.0.0.1:{httpd.server_address[1]}"
        good = client_for(url, None, ca_file=str(pki / "ca.pem"))
        for _ in range(3):
            assert good.get(new_key()) is None
        assert good.stats()["server_errors"] == 0
        assert len(handler.seen) == 3
        # Without the CA the certificate does not verify: a miss, counted.
        untrusting = client_for(url, None)
        assert untrusting.get(new_key()) is None
        assert untrusting.stats()["server_errors"] == 1
        assert len(handler.seen) == 3
    finally:
        httpd.shutdown()


def test_mtls_needs_the_client_certificate(pki, client_for):
    httpd, handler = serve(tls=tls_context(pki, True))
    try:
        url = f"https://127.0.0.1:{httpd.server_address[1]}"
        anonymous = client_for(url, None, ca_file=str(pki / "ca.pem"))
        assert anonymous.get(new_key()) is None
        assert anonymous.stats()["server_errors"] == 1
        authenticated = client_for(url, None, ca_file=str(pki / "ca.pem"), client_cert=str(pki / "client.pem"),
                                   client_key=str(pki / "client.key"))
        assert authenticated.get(new_key()) is None
        assert authenticated.stats()["server_errors"] == 0
        assert len(handler.seen) == 1
    finally:
        httpd.shutdown()


def test_bad_tls_files_are_configuration_errors(pki, core):
    with pytest.raises(core.KcacheError):
        core.Client("https://127.0.0.1:1", None, "none", ca_file="/nonexistent.pem")
    with pytest.raises(core.KcacheError):
        core.Client("https://127.0.0.1:1", None, "none", ca_file=str(pki / "ca.pem"),
                    client_cert=str(pki / "client.pem"), client_key=str(pki / "server.key"))


def test_a_server_answering_500_means_a_local_compile(client_for):
    httpd, handler = serve(status=500)
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        c = client_for(url, "n")
        key = new_key()
        t0 = time.monotonic()
        data, source = c.get_or_compile(key, lambda: make_bundle(key))
        print(f"server answering 500: local after {time.monotonic() - t0:.3f} s")
        assert source == "local"
        assert c.stats()["server_errors"] == 1
    finally:
        httpd.shutdown()


def test_a_server_that_never_answers_costs_one_request_deadline(client_for):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts (the kernel completes the handshake) and never answers
    listener.setblocking(False)
    conns: list[socket.socket] = []

    def take_new_connections() -> int:
        """Takes the connections the client made so far off the backlog."""
        n = 0
        while True:
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                return n
            conn.setblocking(False)
            conns.append(conn)
            n += 1

    def requests_received() -> int:
        data = b""
        for conn in conns:
            while True:
                try:
                    chunk = conn.recv(65536)
                except (BlockingIOError, ConnectionResetError):
                    break
                if not chunk:
                    break
                data += chunk
        return data.count(b" HTTP/1.1\r\n")

    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        c = client_for(url, "n", request_timeout_ms=700, breaker_threshold=1)
        key = new_key()
        t0 = time.monotonic()
        data, source = c.get_or_compile(key, lambda: make_bundle(key))
        took = time.monotonic() - t0
        print(f"server never answers: local after {took:.3f} s (request deadline 0.7 s)")
        assert source == "local"
        # A deadline never fires early; the upper bound is only "one
        # deadline, not a hang" and generous for a loaded machine.
        assert 0.6 < took < 10
        assert take_new_connections() >= 1
        asked = requests_received()
        assert asked >= 1
        # The breaker is open now: the next miss does not contact the server
        # at all (no new connection, no request on an old one).
        k2 = new_key()
        assert c.get_or_compile(k2, lambda: make_bundle(k2))[1] == "local"
        assert take_new_connections() == 0
        assert requests_received() == 0  # nothing beyond what was read above
        assert c.stats()["breaker"] == "open"
    finally:
        for conn in conns:
            conn.close()
        listener.close()
