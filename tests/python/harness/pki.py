"""Certificates for the TLS tests, made by the openssl CLI: CAs, server
leaves (for 127.0.0.1 and localhost) and client leaves. `pki` is a
module-scoped fixture; import it into a test module to use it."""

from __future__ import annotations

import subprocess

import pytest


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign", cwd=d)
    return d / f"{name}.crt"


def make_leaf(d, ca, name, server: bool):
    ext = d / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n" if server
                   else "extendedKeyUsage=clientAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "2", "-extfile", ext.name, "-out", f"{name}.crt", cwd=d)
    return d / f"{name}.crt", d / f"{name}.key"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    out = {"dir": d}
    for ca in ("ca", "ca2", "clientca", "rogueca"):
        out[ca] = make_ca(d, ca)
    out["server"] = make_leaf(d, "ca", "server", True)
    out["server2"] = make_leaf(d, "ca2", "server2", True)
    out["client"] = make_leaf(d, "clientca", "client", False)
    out["rogue_client"] = make_leaf(d, "rogueca", "rogue", False)
    return out
