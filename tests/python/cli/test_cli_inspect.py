"""kcache inspect: the manifest — key fields, sections, producer, signature."""

from __future__ import annotations

import json

from cli_harness import (
    EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, _core, cli_json, make_artifact, requires_binaries, run_cli,
    value_column,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries


def test_inspect_table(server):
    art = server.put(make_artifact(compile_seconds=95))
    r = run_cli("inspect", art.key, server=server)
    assert r.returncode == EXIT_OK, r.stderr
    head, _, rest = r.stdout.partition("\n\n")
    assert len(value_column(head.splitlines())) == 1
    rows = {line[:14].strip(): line[14:].strip() for line in head.splitlines()}
    assert rows["key"] == art.key and rows["label"] == art.label
    assert rows["target"] == "cpu:avx512" and rows["mode"] == "default" and rows["dtype"] == "f32"
    assert rows["toolchain"] == "torch-2.13.0" and rows["compile time"] == "1m35s"
    assert rows["signature"] == "unsigned"
    # The server checked the structure, not the hash: the row says so.
    assert rows["bundle"].endswith("(as stored, not rehashed: `kcache verify` checks it)"), rows["bundle"]
    assert rows["producer"].startswith("host node-7, pid 4242, kcache 0.1.0")
    # Every key field of the explanation, with its sub-hash prefix.
    for name, f in art.explanation["fields"].items():
        assert any(line.split()[:2] == [name, f["hash"][:12]] for line in rest.splitlines() if line.strip()), name
    assert '"isa": "avx512"' in rest
    assert "inductor/c2/kernel.so" in rest and "torch/mega_cache" in rest
    assert "torch_cache_keys" in rest and "aotautograd-def" in rest


def test_inspect_json_and_prefix(server):
    art = server.put(make_artifact())
    j = cli_json("inspect", art.key[:10], server=server)
    assert j["entry"]["key"] == art.key
    assert j["manifest"]["explanation"] == art.explanation
    assert [s["name"] for s in j["bundle"]["sections"]] == ["torch/mega_cache", "inductor/c2/kernel.so"]
    assert j["bundle"]["signer_key_id"] is None


def test_inspect_signed(server):
    private_pem, _public = _core.generate_signing_key()
    art = server.put(make_artifact(signing_key_pem=private_pem))
    j = cli_json("inspect", art.key, server=server)
    key_id = j["bundle"]["signer_key_id"]
    assert key_id
    r = run_cli("inspect", art.key, server=server)
    assert f"signed, key id {key_id}" in r.stdout


def test_inspect_exit_codes(server):
    assert run_cli("inspect", "0" * 64, server=server).returncode == EXIT_NOT_FOUND
    assert run_cli("inspect", "0123456", server=server).returncode == EXIT_NOT_FOUND  # prefix of nothing
    assert run_cli("inspect", "NOTAKEY", server=server).returncode == EXIT_USAGE
    assert run_cli("inspect", "abc", server=server).returncode == EXIT_USAGE  # too short a prefix
    r = run_cli("--json", "inspect", "0" * 64, server=server)
    assert r.stdout == "" and "no entry" in r.stderr
    json.dumps(r.stderr)
