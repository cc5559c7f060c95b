"""TLS and mTLS (--tls-cert, --tls-key, --tls-client-ca) with certificates
made by the openssl CLI: the right CA connects, plain HTTP and a wrong CA
fail cleanly, mTLS refuses a client without a certificate, and a SIGHUP with
a new certificate reaches new connections while an old keep-alive
connection finishes its request."""

from __future__ import annotations

import http.client
import shutil
import signal
import socket
import ssl
import threading

import pytest

from harness.pki import pki  # noqa: F401 - the module's certificates, as a fixture
from server_harness import make_bundle, new_key
from test_auth import wait_for_log

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def client_ctx(cafile, cert=None):
    ctx = ssl.create_default_context(cafile=str(cafile))
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx


def https(srv, ctx, method="GET", path="/healthz", body=None, headers=None):
    conn = http.client.HTTPSConnection(srv.host, srv.port, context=ctx, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def tls_args(cert, key, client_ca=None):
    args = ["--tls-cert", str(cert), "--tls-key", str(key)]
    return args + (["--tls-client-ca", str(client_ca)] if client_ca else [])


def peer_cert(srv, ctx) -> bytes:
    with socket.create_connection((srv.host, srv.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return s.getpeercert(binary_form=True)


def test_right_ca_connects_and_serves(start_server, pki):
    srv = start_server(args=tls_args(*pki["server"]))
    ctx = client_ctx(pki["ca"])
    assert https(srv, ctx)[0] == 200
    key = new_key()
    bundle = make_bundle(key)
    assert https(srv, ctx, "PUT", f"/v1/artifacts/{key}", bundle)[0] == 201
    assert https(srv, ctx, "GET", f"/v1/artifacts/{key}") == (200, bundle)
    # Keep-alive over TLS: several requests on one connection.
    conn = http.client.HTTPSConnection(srv.host, srv.port, context=ctx, timeout=10)
    for _ in range(3):
        conn.request("GET", f"/v1/artifacts/{key}")
        r = conn.getresponse()
        assert r.status == 200 and r.read() == bundle
    conn.close()


def test_plain_http_to_tls_port_fails_cleanly(start_server, pki):
    srv = start_server(args=tls_args(*pki["server"]))
    r = srv.get("/healthz")
    assert r.status == 400 and r.json()["error"] == "tls_required"
    # The server is unharmed.
    assert https(srv, client_ctx(pki["ca"]))[0] == 200


def test_wrong_ca_fails(start_server, pki):
    srv = start_server(args=tls_args(*pki["server"]))
    with pytest.raises(ssl.SSLCertVerificationError):
        https(srv, client_ctx(pki["ca2"]))
    assert https(srv, client_ctx(pki["ca"]))[0] == 200


def test_mtls(start_server, pki):
    srv = start_server(args=tls_args(*pki["server"], pki["clientca"]))
    assert https(srv, client_ctx(pki["ca"], pki["client"]))[0] == 200
    for cert in (None, pki["rogue_client"]):
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            https(srv, client_ctx(pki["ca"], cert))
    assert "TLS handshake failed" in srv.read_log()
    assert https(srv, client_ctx(pki["ca"], pki["client"]))[0] == 200


def test_mtls_counts_as_authentication_for_remote(start_server, pki):
    srv = start_server(args=["--listen", "0.0.0.0:0", *tls_args(*pki["server"], pki["clientca"])])
    srv.host = "127.0.0.1"
    assert https(srv, client_ctx(pki["ca"], pki["client"]), "GET", "/v1/stats")[0] == 200


def test_sighup_swaps_certificate_for_new_connections(start_server, pki, tmp_path):
    cert, key = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(pki["server"][0], cert)
    shutil.copy(pki["server"][1], key)
    srv = start_server(args=tls_args(cert, key))
    old_ctx = client_ctx(pki["ca"])
    old_der = peer_cert(srv, old_ctx)

    # An old keep-alive connection with a request in flight across the reload:
    # a GET waiting on a lease, answered by a PUT made on a new connection.
    k = new_key()
    lease = https(srv, old_ctx, "POST", f"/v1/leases/{k}")
    assert lease[0] == 201
    old = http.client.HTTPSConnection(srv.host, srv.port, context=old_ctx, timeout=20)
    old.request("GET", "/healthz")
    r = old.getresponse()
    assert r.status == 200
    r.read()
    got = {}

    def wait():
        old.request("GET", f"/v1/artifacts/{k}?wait_ms=15000")
        resp = old.getresponse()
        got["status"], got["body"] = resp.status, resp.read()

    t = threading.Thread(target=wait)
    t.start()

    shutil.copy(pki["server2"][0], cert)
    shutil.copy(pki["server2"][1], key)
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "SIGHUP: reload done")
    assert "reloaded TLS certificates" in srv.read_log()

    new_ctx = client_ctx(pki["ca2"])
    new_der = peer_cert(srv, new_ctx)
    assert new_der != old_der
    with pytest.raises(ssl.SSLCertVerificationError):
        https(srv, old_ctx)  # new connections present the new certificate
    bundle = make_bundle(k)
    assert https(srv, new_ctx, "PUT", f"/v1/artifacts/{k}", bundle)[0] == 201
    t.join(20)
    assert got == {"status": 200, "body": bundle}
    # The old connection is still open, on the old certificate.
    assert old.sock.getpeercert(binary_form=True) == old_der
    old.request("GET", "/healthz")
    assert old.getresponse().status == 200
    old.close()


def test_sighup_with_a_broken_certificate_keeps_the_old(start_server, pki, tmp_path):
    cert, key = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(pki["server"][0], cert)
    shutil.copy(pki["server"][1], key)
    srv = start_server(args=tls_args(cert, key))
    shutil.copy(pki["server2"][1], key)  # key no longer matches the certificate
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "TLS certificates not reloaded")
    assert https(srv, client_ctx(pki["ca"]))[0] == 200


def test_tls_config_errors(tmp_path, pki):
    from test_auth import run_server
    r = run_server(["--listen", "127.0.0.1:0", "--tls-cert", str(pki["server"][0])])
    assert r.returncode == 2 and b"--tls-cert and --tls-key go together" in r.stderr
    r = run_server(["--listen", "127.0.0.1:0", "--tls-cert", str(pki["server"][0]), "--tls-key",
                    str(pki["server2"][1])])
    assert r.returncode == 2 and b"mismatch" in r.stderr
