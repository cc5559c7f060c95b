"""Hostile and broken requests: each answered correctly, the server keeps
serving others, and nothing stored is harmed."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from server_harness import body_of, make_bundle, new_key, raw_exchange, read_until_quiet, status_of


def req(method: str, target: str, headers: dict | None = None, body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: test"]
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.fixture(scope="module")
def canary(server):
    """An entry that must survive every test in this module intact."""
    key = new_key()
    bundle = make_bundle(key)
    assert server.put_artifact(key, bundle).status == 201
    yield key, bundle
    assert server.get(f"/v1/artifacts/{key}").body == bundle


@pytest.mark.parametrize("target", [
    "/v1/artifacts/../../etc/passwd",
    "/v1/artifacts/..%2f..%2fetc%2fpasswd",
    "/v1/artifacts/%2e%2e/%2e%2e/etc/passwd",
    "/v1/artifacts/./" + "a" * 64,
    "/v1//artifacts/" + "a" * 64,
    "/v1/artifacts/" + "a" * 64 + "/../" + "b" * 64,
    "/v1/artifacts\\..\\x",
    "http://evil.example/v1/artifacts/" + "a" * 64,
])
def test_path_traversal_is_400(server, canary, target):
    raw = raw_exchange(server, req("GET", target))
    assert status_of(raw) == 400, raw
    assert body_of(raw)["error"] in {"bad_path", "invalid_key", "bad_request"}


@pytest.mark.parametrize("key", [
    "A" * 64,                 # uppercase
    "a" * 63, "a" * 65,       # length
    "g" * 64,                 # not hex
    "a" * 32 + "-" + "a" * 31,
    "",                       # empty
    "a" * 64 + ".bundle",
])
@pytest.mark.parametrize("route", ["/v1/artifacts/{}", "/v1/entries/{}", "/v1/leases/{}", "/v1/leases/{}/renew"])
def test_non_hex_keys_are_400(server, canary, key, route):
    method = "POST" if route.startswith("/v1/leases") else "GET"
    r = server.request(method, route.format(key))
    assert r.status == 400, (route, key, r.body)
    assert r.json()["error"] in {"invalid_key", "bad_path"} and r.json()["message"]


def test_bad_key_put_is_400_before_body(server, canary):
    bundle = make_bundle(new_key())
    r = server.request("PUT", "/v1/artifacts/" + "Z" * 64, body=bundle)
    assert r.status == 400 and r.json()["error"] == "invalid_key"


def test_content_length_shorter_than_body(server, canary):
    key = new_key()
    bundle = make_bundle(key)
    raw = raw_exchange(server, req("PUT", f"/v1/artifacts/{key}", {"Content-Length": len(bundle) - 10}, bundle))
    assert status_of(raw) == 400  # the first len-10 bytes are a truncated bundle
    assert server.get(f"/v1/artifacts/{key}").status == 404


def test_content_length_longer_than_body_is_cut_off(server, canary):
    key = new_key()
    bundle = make_bundle(key)
    t0 = time.monotonic()
    with server.connect(timeout=10) as s:
        s.sendall(req("PUT", f"/v1/artifacts/{key}", {"Content-Length": len(bundle) + 100}, bundle))
        got = read_until_quiet(s, 8)
    assert got == b""  # deadline: the connection is closed, no half answer
    assert time.monotonic() - t0 < 7
    assert server.get(f"/v1/artifacts/{key}").status == 404


@pytest.mark.parametrize("headers", [
    {"Content-Length": "12abc"},
    {"Content-Length": "-5"},
    {"Content-Length": "5", "Transfer-Encoding": "chunked"},
    {"Content-Length": "5, 6"},
])
def test_malformed_content_length_is_400(server, canary, headers):
    raw = raw_exchange(server, req("PUT", f"/v1/artifacts/{new_key()}", headers, b"hello"))
    assert status_of(raw) == 400


def test_truncated_body_stores_nothing(server, canary):
    key = new_key()
    bundle = make_bundle(key, payload=b"x" * 5000)
    with server.connect() as s:
        s.sendall(req("PUT", f"/v1/artifacts/{key}", {"Content-Length": len(bundle)}, bundle[: len(bundle) // 2]))
        s.shutdown(socket.SHUT_WR)
        assert read_until_quiet(s, 5) == b""
    assert server.get(f"/v1/artifacts/{key}").status == 404
    assert server.request("HEAD", f"/v1/artifacts/{key}").status == 404


def test_truncated_chunked_body_stores_nothing(server, canary):
    key = new_key()
    bundle = make_bundle(key)
    with server.connect() as s:
        s.sendall(req("PUT", f"/v1/artifacts/{key}", {"Transfer-Encoding": "chunked"})
                  + f"{len(bundle):x}\r\n".encode() + bundle[:50])
        s.shutdown(socket.SHUT_WR)
        assert read_until_quiet(s, 5) == b""
    assert server.get(f"/v1/artifacts/{key}").status == 404


def test_chunked_upload_works(server, canary):
    key = new_key()
    bundle = make_bundle(key)
    half = len(bundle) // 2
    body = (f"{half:x}\r\n".encode() + bundle[:half] + b"\r\n" + f"{len(bundle) - half:x}\r\n".encode()
            + bundle[half:] + b"\r\n0\r\n\r\n")
    raw = raw_exchange(server, req("PUT", f"/v1/artifacts/{key}", {"Transfer-Encoding": "chunked"}, body))
    assert status_of(raw) == 201
    assert server.get(f"/v1/artifacts/{key}").body == bundle


def test_oversized_headers_are_431(server, canary):
    raw = raw_exchange(server, req("GET", "/healthz", {"X-Junk": "j" * 20000}))
    assert status_of(raw) == 431
    assert body_of(raw)["error"] == "headers_too_large"
    raw = raw_exchange(server, req("GET", "/healthz?" + "q" * 20000))
    assert status_of(raw) == 431


def test_declared_oversized_body_is_413_without_reading_it(server, canary):
    t0 = time.monotonic()
    raw = raw_exchange(server, req("PUT", f"/v1/artifacts/{new_key()}", {"Content-Length": str(3 << 30)}, b"KCB"))
    assert status_of(raw) == 413
    assert body_of(raw)["error"] == "too_large"
    assert b"connection: close" in raw.lower()
    assert time.monotonic() - t0 < 3


def test_json_routes_have_small_body_limit(server, canary):
    raw = raw_exchange(server, req("POST", "/v1/evict", {"Content-Length": str(2 << 20)}))
    assert status_of(raw) == 413


def test_chunked_body_over_limit_is_413(start_server):
    srv = start_server(args=["--max-body-bytes", "4K"])
    chunk = b"z" * 1024
    body = b"".join(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in range(8)) + b"0\r\n\r\n"
    raw = raw_exchange(srv, req("PUT", f"/v1/artifacts/{new_key()}", {"Transfer-Encoding": "chunked"}, body))
    assert status_of(raw) == 413


@pytest.mark.parametrize("line", [b"GARBAGE\r\n\r\n", b"GET /healthz HTTP/9.9\r\n\r\n", b"GET\r\n\r\n",
                                  b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40])
def test_malformed_request_is_400_or_closed(server, canary, line):
    raw = raw_exchange(server, line, timeout=4)
    assert raw == b"" or status_of(raw) == 400


def test_bad_query_escape_is_400(server, canary):
    raw = raw_exchange(server, req("GET", "/v1/entries?label_prefix=%zz"))
    assert status_of(raw) == 400 and body_of(raw)["error"] == "bad_query"


def test_slow_client_is_cut_off_and_others_are_served(server, canary):
    key, bundle = canary
    request = req("GET", "/healthz")
    result = {}

    def trickle():
        t0 = time.monotonic()
        with server.connect(timeout=15) as s:
            try:
                for b in request:
                    s.sendall(bytes([b]))
                    time.sleep(1.0)
                    s.settimeout(0.01)
                    try:
                        if s.recv(1) == b"":
                            break
                    except socket.timeout:
                        pass
                    finally:
                        s.settimeout(15)
            except (BrokenPipeError, ConnectionResetError):
                pass
        result["cut_after"] = time.monotonic() - t0

    t = threading.Thread(target=trickle)
    t.start()
    served = 0
    worst = 0.0
    while t.is_alive():
        t0 = time.monotonic()
        assert server.get(f"/v1/artifacts/{key}").body == bundle
        worst = max(worst, time.monotonic() - t0)
        served += 1
        time.sleep(0.05)
    t.join()
    print(f"\nslow client cut off after {result['cut_after']:.1f} s; {served} requests served meanwhile, "
          f"worst {worst * 1000:.1f} ms")
    # Read deadline 3 s; the bug (no deadline per request) gives len(request)
    # = 37 s. A bound far from both, safe on a loaded machine.
    assert result["cut_after"] < 15
    assert served > 10  # others were served while it trickled (the worst latency is printed, not asserted)


def test_slow_body_is_cut_off(server, canary):
    key = new_key()
    bundle = make_bundle(key)
    t0 = time.monotonic()
    with server.connect(timeout=15) as s:
        s.sendall(req("PUT", f"/v1/artifacts/{key}", {"Content-Length": len(bundle)}))
        closed = False
        for b in bundle[:10]:
            try:
                s.sendall(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            s.settimeout(1.0)
            try:
                if s.recv(1) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed = True
                break
    assert closed and time.monotonic() - t0 < 15  # read deadline 3 s; not cut off, the loop gives up unclosed
    assert server.get(f"/v1/artifacts/{key}").status == 404


def test_http10_and_connection_close(server, canary):
    raw = raw_exchange(server, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert raw.startswith(b"HTTP/1.0 200")
    raw = raw_exchange(server, req("GET", "/healthz", {"Connection": "close"}))
    assert status_of(raw) == 200 and b"connection: close" in raw.lower()


def test_pipelined_requests_answered_in_order(server, canary):
    key, bundle = canary
    data = req("GET", "/healthz") + req("HEAD", f"/v1/artifacts/{key}") + req("GET", "/healthz", {"Connection": "close"})
    with server.connect() as s:
        s.sendall(data)
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
    assert out.count(b"HTTP/1.1 200") == 3
