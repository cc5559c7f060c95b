"""TLS end to end against the real kcache-server: the admin CLI (`https://`,
--cacert, --cert, --key and their KCACHE_* variables) and the C++ client
library (kcache._core.Client) over TLS and mTLS, including a certificate
reload (SIGHUP) while a client holds a connection."""

from __future__ import annotations

import shutil
import signal
import ssl
import time

import pytest
from cli_harness import Server, make_artifact, requires_binaries, run_cli
from harness.pki import pki  # noqa: F401 - certificates made by the openssl CLI

pytestmark = [requires_binaries,
              pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")]


def ctx(cafile, cert=None):
    c = ssl.create_default_context(cafile=str(cafile))
    if cert:
        c.load_cert_chain(str(cert[0]), str(cert[1]))
    return c


def tls_server(tmp_path, pki, mtls=False, cert=None):  # noqa: F811
    cert = cert or pki["server"]
    args = ["--tls-cert", str(cert[0]), "--tls-key", str(cert[1])]
    if mtls:
        args += ["--tls-client-ca", str(pki["clientca"])]
    return Server(tmp_path, args=args, tls=ctx(pki["ca"], pki["client"] if mtls else None))


def test_cli_over_https_verifies_the_server(tmp_path, pki):  # noqa: F811
    srv = tls_server(tmp_path, pki)
    try:
        art = srv.put(make_artifact())
        ok = run_cli("--json", "ls", server=srv, env={"KCACHE_CA_FILE": str(pki["ca"])})
        assert ok.returncode == 0, ok.stderr
        assert art.key in ok.stdout
        # The option as well as the variable.
        assert run_cli("--cacert", str(pki["ca"]), "stats", server=srv).returncode == 0
        # Another CA: refused, with a message that says what to give.
        bad = run_cli("ls", server=srv, env={"KCACHE_CA_FILE": str(pki["ca2"])})
        assert bad.returncode == 1 and "TLS handshake" in bad.stderr and "--cacert" in bad.stderr
        # The system store does not know this CA either.
        assert run_cli("ls", server=srv).returncode == 1
        # Plain http:// to the TLS port: a clear error, not a hang.
        plain = run_cli("ls", server=srv, env={"KCACHE_URL": srv.url.replace("https", "http")})
        assert plain.returncode != 0
    finally:
        assert srv.stop() == 0


def test_cli_with_mtls(tmp_path, pki):  # noqa: F811
    srv = tls_server(tmp_path, pki, mtls=True)
    try:
        srv.put(make_artifact())
        env = {"KCACHE_CA_FILE": str(pki["ca"])}
        without = run_cli("stats", server=srv, env=env)
        assert without.returncode == 1, without.stdout
        with_cert = run_cli("--cert", str(pki["client"][0]), "--key", str(pki["client"][1]),
                            "--json", "stats", server=srv, env=env)
        assert with_cert.returncode == 0, with_cert.stderr
        rogue = run_cli("stats", server=srv, env={**env, "KCACHE_CLIENT_CERT": str(pki["rogue_client"][0]),
                                                  "KCACHE_CLIENT_KEY": str(pki["rogue_client"][1])})
        assert rogue.returncode == 1
        half = run_cli("--cert", str(pki["client"][0]), "stats", server=srv, env=env)
        assert half.returncode == 2 and "--cert and --key go together" in half.stderr
    finally:
        assert srv.stop() == 0


def test_cpp_client_over_tls_and_mtls_across_a_certificate_reload(tmp_path, pki):  # noqa: F811
    from kcache import _core

    live = (tmp_path / "live.crt", tmp_path / "live.key")
    shutil.copy(pki["server"][0], live[0])
    shutil.copy(pki["server"][1], live[1])
    srv = tls_server(tmp_path, pki, mtls=True, cert=live)
    try:
        both_cas = tmp_path / "cas.pem"  # the client trusts the old and the new issuer
        both_cas.write_bytes(pki["ca"].read_bytes() + pki["ca2"].read_bytes())
        client = _core.Client(url=srv.url, local_dir="none", ca_file=str(both_cas),
                              client_cert=str(pki["client"][0]), client_key=str(pki["client"][1]))
        first = make_artifact()
        assert client.put(first.key, first.bundle)
        assert client.get(first.key) == first.bundle  # a kept-alive connection now
        # Without a client certificate the server refuses the handshake.
        no_cert = _core.Client(url=srv.url, local_dir="none", ca_file=str(both_cas), retries=0)
        assert no_cert.get(first.key) is None
        # Reload the server's certificate while `client` holds its connection.
        shutil.copy(pki["server2"][0], live[0])
        shutil.copy(pki["server2"][1], live[1])
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while "reloaded TLS certificates" not in srv.log_path.read_text(errors="replace"):
            assert time.monotonic() < deadline, "no reload in the server log"
            time.sleep(0.1)
        second = make_artifact(label="GPT2Block/cpu:avx512/f32/default/infer")
        assert client.put(second.key, second.bundle)
        assert client.get(second.key) == second.bundle
        assert client.get(first.key) == first.bundle
        # A fresh client that trusts only the old CA cannot reach it any more.
        stale = _core.Client(url=srv.url, local_dir="none", ca_file=str(pki["ca"]), retries=0,
                             client_cert=str(pki["client"][0]), client_key=str(pki["client"][1]))
        assert stale.get(second.key) is None
        assert stale.stats()["server_errors"] >= 1
    finally:
        assert srv.stop() == 0
