"""Signed uploads: --require-signed with --trusted-keys. Unsigned, untrusted
or tampered bundles are 400 bad_signature and nothing is stored; a bundle
signed by a trusted key is 201."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from kcache import _core
from server_harness import SERVER_BIN, make_bundle, manifest_for, new_key
from test_auth import wait_for_log


def signed_bundle(key: str, private_pem: str | None) -> bytes:
    return _core.write_bundle(json.dumps(manifest_for(key)), [("mega_cache", b"signed payload")], private_pem)


@pytest.fixture
def keys(tmp_path):
    trusted_priv, trusted_pub = _core.generate_signing_key()
    other_priv, other_pub = _core.generate_signing_key()
    pub_file = tmp_path / "trusted.pem"
    pub_file.write_text(trusted_pub)
    return {"trusted": trusted_priv, "other": other_priv, "other_pub": other_pub, "file": pub_file}


def assert_absent(srv, key):
    assert srv.request("HEAD", f"/v1/artifacts/{key}").status == 404


def test_require_signed(start_server, keys):
    srv = start_server(args=["--require-signed", "--trusted-keys", str(keys["file"])])

    unsigned = new_key()
    r = srv.put_artifact(unsigned, make_bundle(unsigned))
    assert r.status == 400
    assert r.json()["error"] == "bad_signature" and "not signed" in r.json()["message"]
    assert_absent(srv, unsigned)

    untrusted = new_key()
    r = srv.put_artifact(untrusted, signed_bundle(untrusted, keys["other"]))
    assert r.status == 400 and r.json()["error"] == "bad_signature"
    assert_absent(srv, untrusted)

    # A trusted signature over other bytes: flip a byte of the signature block.
    tampered = new_key()
    b = bytearray(signed_bundle(tampered, keys["trusted"]))
    b[-1] ^= 0x01
    r = srv.put_artifact(tampered, bytes(b))
    assert r.status == 400 and r.json()["error"] in ("bad_signature", "corrupt")
    assert_absent(srv, tampered)

    good = new_key()
    bundle = signed_bundle(good, keys["trusted"])
    r = srv.put_artifact(good, bundle)
    assert r.status == 201, r.body
    assert srv.get(f"/v1/artifacts/{good}").body == bundle
    entry = srv.get(f"/v1/entries/{good}").json()
    assert entry["bundle"]["signer_key_id"]

    stats = srv.get("/v1/stats").json()
    assert stats["uploads"]["rejected"] == 3 and stats["uploads"]["stored"] == 1


def test_trusted_keys_without_require_checks_signed_only(start_server, keys):
    srv = start_server(args=["--trusted-keys", str(keys["file"])])
    unsigned = new_key()
    assert srv.put_artifact(unsigned, make_bundle(unsigned)).status == 201
    untrusted = new_key()
    r = srv.put_artifact(untrusted, signed_bundle(untrusted, keys["other"]))
    assert r.status == 400 and r.json()["error"] == "bad_signature"
    trusted = new_key()
    assert srv.put_artifact(trusted, signed_bundle(trusted, keys["trusted"])).status == 201


def test_several_keys_and_sighup_reload(start_server, keys, tmp_path):
    srv = start_server(args=["--require-signed", "--trusted-keys", str(keys["file"])])
    key = new_key()
    assert srv.put_artifact(key, signed_bundle(key, keys["other"])).status == 400
    # Trust the second key too (two PEM blocks in one file), then reload.
    keys["file"].write_text(keys["file"].read_text() + keys["other_pub"])
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "SIGHUP: reload done")
    assert "reloaded trusted keys" in srv.read_log()
    assert srv.put_artifact(key, signed_bundle(key, keys["other"])).status == 201


def test_require_signed_needs_keys():
    r = subprocess.run([str(SERVER_BIN), "--storage", "memory:", "--require-signed"], capture_output=True, timeout=10)
    assert r.returncode == 2 and b"--require-signed needs --trusted-keys" in r.stderr


def test_bad_key_file_is_a_config_error(tmp_path):
    f = tmp_path / "k.pem"
    f.write_text("not a key\n")
    r = subprocess.run([str(SERVER_BIN), "--storage", "memory:", "--listen", "127.0.0.1:0", "--require-signed",
                        "--trusted-keys", str(f)], capture_output=True, timeout=10)
    assert r.returncode == 2 and b"no PUBLIC KEY PEM block" in r.stderr
