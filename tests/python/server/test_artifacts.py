"""GET / HEAD / PUT / DELETE /v1/artifacts/{key} (docs/protocol.md)."""

from __future__ import annotations

import json
import secrets

from server_harness import make_bundle, new_key


def test_put_get_head_delete_roundtrip(server):
    key = new_key()
    bundle = make_bundle(key)
    r = server.put_artifact(key, bundle)
    assert r.status == 201, r.body
    body = r.json()
    assert body["key"] == key and body["stored"] is True and body["size"] == len(bundle)
    assert body["label"] == "GPT2Block/cpu:avx512/f32/default/train"
    assert body["lease_released"] is False and len(body["digest"]) == 64
    assert r.headers["location"] == f"/v1/artifacts/{key}"

    g = server.get(f"/v1/artifacts/{key}")
    assert g.status == 200 and g.body == bundle
    assert g.headers["content-type"] == "application/octet-stream"
    assert "x-kcache-request-id" in g.headers

    h = server.request("HEAD", f"/v1/artifacts/{key}")
    assert h.status == 200 and h.body == b""
    assert int(h.headers["content-length"]) == len(bundle)

    d = server.request("DELETE", f"/v1/artifacts/{key}")
    assert d.status == 204 and d.body == b""
    assert server.get(f"/v1/artifacts/{key}").status == 404
    d2 = server.request("DELETE", f"/v1/artifacts/{key}")
    assert d2.status == 404 and d2.json()["error"] == "not_found"


def test_missing_is_404_json(server):
    key = new_key()
    r = server.get(f"/v1/artifacts/{key}")
    assert r.status == 404
    assert r.json() == {"error": "not_found", "message": f"no artifact stored under {key}"}
    h = server.request("HEAD", f"/v1/artifacts/{key}")
    assert h.status == 404 and h.body == b""


def test_first_writer_wins(server):
    key = new_key()
    first = make_bundle(key, payload=b"first")
    second = make_bundle(key, payload=b"second")
    assert server.put_artifact(key, first).status == 201
    r = server.put_artifact(key, second)
    assert r.status == 200 and r.json()["stored"] is False
    assert server.get(f"/v1/artifacts/{key}").body == first


def test_metadata_comes_from_manifest_not_headers(server):
    key = new_key()
    bundle = make_bundle(key, label="Attn/cuda:sm_90/bf16/max-autotune/infer", compile_seconds=2.5)
    r = server.put_artifact(key, bundle, headers={"X-Kcache-Label": "Lies/cpu:x/f32/default/train",
                                                  "X-Kcache-Target": "bogus"})
    assert r.status == 201
    e = server.get(f"/v1/entries/{key}").json()["entry"]
    assert e["label"] == "Attn/cuda:sm_90/bf16/max-autotune/infer"
    assert (e["target"], e["dtype"], e["mode"]) == ("cuda:sm_90", "bf16", "max-autotune")
    assert e["toolchain"] == "torch-2.13.0"
    assert e["compile_ms"] == 2500


def test_toolchain_falls_back_to_hash_prefix(server):
    key = new_key()
    assert server.put_artifact(key, make_bundle(key, toolchain_value=None)).status == 201
    assert server.get(f"/v1/entries/{key}").json()["entry"]["toolchain"] == "tc-" + "ab" * 6


def test_key_mismatch_is_400_and_nothing_stored(server):
    key, other = new_key(), new_key()
    r = server.put_artifact(key, make_bundle(other))
    assert r.status == 400
    assert r.json()["error"] == "key_mismatch"
    assert "message" in r.json()
    assert server.get(f"/v1/artifacts/{key}").status == 404
    assert server.get(f"/v1/artifacts/{other}").status == 404


def test_corrupt_trailer_is_400(server):
    key = new_key()
    bundle = bytearray(make_bundle(key))
    bundle[-1] ^= 0xFF  # last byte of the SHA-256 trailer
    r = server.put_artifact(key, bytes(bundle))
    assert r.status == 400 and r.json()["error"] == "corrupt"
    bundle = bytearray(make_bundle(key))
    bundle[40] ^= 0x01  # a byte the trailer covers
    r = server.put_artifact(key, bytes(bundle))
    assert r.status == 400
    assert server.get(f"/v1/artifacts/{key}").status == 404


def test_not_a_bundle_and_truncated_bundle_are_400(server):
    key = new_key()
    r = server.put_artifact(key, b"definitely not a bundle, just some bytes of text....")
    assert r.status == 400 and r.json()["error"] == "bad_magic"
    full = make_bundle(key)
    r = server.put_artifact(key, full[: len(full) // 2])
    assert r.status == 400 and r.json()["error"] in {"truncated", "corrupt"}
    r = server.put_artifact(key, b"")
    assert r.status == 400 and r.json()["error"] == "empty_body"
    assert server.get(f"/v1/artifacts/{key}").status == 404


def test_body_over_limit_is_413(start_server):
    srv = start_server(args=["--max-body-bytes", "4K"])
    key = new_key()
    big = make_bundle(key, payload=secrets.token_bytes(8192))  # random: zstd cannot shrink it
    assert len(big) > 4096
    r = srv.put_artifact(key, big)
    assert r.status == 413 and r.json()["error"] == "too_large"
    small_key = new_key()
    assert srv.put_artifact(small_key, make_bundle(small_key)).status == 201
    assert srv.get(f"/v1/artifacts/{key}").status == 404


def test_storage_full_is_507(start_server):
    srv = start_server(args=["--max-bytes", "2K"])
    key = new_key()
    r = srv.put_artifact(key, make_bundle(key, payload=secrets.token_bytes(4096)))
    assert r.status == 507, r.body
    assert r.json()["error"] == "storage_full"


def test_method_not_allowed_has_allow_header(server):
    r = server.request("POST", f"/v1/artifacts/{new_key()}", body=b"x")
    assert r.status == 405
    assert r.headers["allow"] == "GET, HEAD, PUT, DELETE"
    assert r.json()["error"] == "method_not_allowed"


def test_keep_alive_serves_many_requests_on_one_connection(server):
    import http.client

    key = new_key()
    bundle = make_bundle(key)
    conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
    conn.request("PUT", f"/v1/artifacts/{key}", body=bundle)
    r = conn.getresponse()
    assert r.status == 201
    r.read()
    for _ in range(20):
        conn.request("GET", f"/v1/artifacts/{key}")
        r = conn.getresponse()
        assert r.status == 200 and r.read() == bundle
        assert r.getheader("Connection", "").lower() != "close"
    conn.close()


def test_unknown_route_404_json(server):
    r = server.get("/v2/nothing")
    assert r.status == 404 and r.json()["error"] == "not_found"
    assert json.loads(r.body)["message"]
