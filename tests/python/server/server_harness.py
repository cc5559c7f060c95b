"""Fixtures for the kcache-server integration tests: the real binary on a
random loopback port (harness/server.py), an HTTP helper, bundle builders
(harness/bundles.py) and a real redis-server.

The binary is $KCACHE_SERVER_BIN, else build/dev/server/kcache-server under
the repository root.
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
# tests/python, for the harness package, also when bench/ scripts import this file.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from harness.bundles import TOOLCHAIN_VALUE, make_bundle, manifest_for, new_key  # noqa: E402,F401
from harness.redis import REDIS, RedisProcess  # noqa: E402,F401
from harness.server import ServerProcess, server_bin  # noqa: E402

SERVER_BIN = server_bin()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


class KcacheServer(ServerProcess):
    """One kcache-server process (harness/server.py) with short deadlines."""

    def __init__(self, tmp: pathlib.Path, args: list[str] | None = None, env: dict[str, str] | None = None,
                 storage: str = "memory:"):
        super().__init__(tmp, storage, ["--read-timeout-ms", "3000", "--write-timeout-ms", "3000",
                                        "--drain-timeout-ms", "3000", *(args or [])], env=env)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout: float = 10) -> Reply:
        return Reply(*self.http(method, path, body, headers, timeout))

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def put_artifact(self, key: str, bundle: bytes, headers: dict | None = None) -> Reply:
        return self.request("PUT", f"/v1/artifacts/{key}", body=bundle,
                            headers={"Content-Type": "application/octet-stream", **(headers or {})})

    def connect(self, timeout: float = 10) -> socket.socket:
        return socket.create_connection((self.host, self.port), timeout=timeout)


@pytest.fixture(scope="session", autouse=True)
def _require_binary():
    if not SERVER_BIN.exists():
        pytest.skip(f"kcache-server not built at {SERVER_BIN} (set KCACHE_SERVER_BIN)")


@pytest.fixture
def start_server(tmp_path):
    """Factory: start_server(args=[...], env={...}, storage=...) → KcacheServer."""
    started: list[KcacheServer] = []

    def start(**kw) -> KcacheServer:
        s = KcacheServer(tmp_path, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        code = s.stop()
        assert code == 0, f"server exited {code}\n{s.read_log()[-4000:]}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A shared memory-backed server for tests that do not need a fresh one."""
    s = KcacheServer(tmp_path_factory.mktemp("srv"))
    yield s
    code = s.stop()
    assert code == 0, f"server exited {code}\n{s.read_log()[-4000:]}"


def raw_exchange(srv: KcacheServer, data: bytes, timeout: float = 5) -> bytes:
    """Sends raw bytes, returns everything the server answers until it closes or goes quiet."""
    with srv.connect(timeout=timeout) as s:
        s.sendall(data)
        return read_until_quiet(s, timeout)


def read_until_quiet(s: socket.socket, timeout: float) -> bytes:
    s.settimeout(timeout)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            break
        if not c:
            break
        chunks.append(c)
        if b"\r\n\r\n" in b"".join(chunks):
            # Stop once a complete response (by Content-Length) is in.
            head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    if len(rest) >= int(line.split(b":")[1]):
                        return b"".join(chunks)
    return b"".join(chunks)


def status_of(raw: bytes) -> int:
    assert raw.startswith(b"HTTP/1."), raw[:200]
    return int(raw.split(b" ", 2)[1])


def body_of(raw: bytes):
    return json.loads(raw.partition(b"\r\n\r\n")[2])


@pytest.fixture
def redis_server(tmp_path):
    if REDIS is None:
        pytest.skip("redis-server not installed")
    r = RedisProcess(tmp_path)
    yield r
    r.stop()


@pytest.fixture
def redis_port(redis_server):
    return redis_server.port


@pytest.fixture
def redis_url(redis_port):
    return f"redis://127.0.0.1:{redis_port}/0?connect_timeout_ms=500&timeout_ms=2000"


def metric_value(srv, name: str) -> float:
    """The value of an unlabelled metric in srv's GET /metrics."""
    for line in srv.get("/metrics", timeout=10).body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def wait_until(pred, seconds: float, why: str, interval: float = 0.02):
    """Polls pred() until it returns something truthy (returned), or fails
    with why after seconds. Waits on an event, not on a duration: the
    deadline is generous because it costs nothing when things go right."""
    deadline = time.monotonic() + seconds
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{why} (after {seconds} s)")
        time.sleep(interval)


def wait_for_metric_at_least(srv, name: str, value: float, seconds: float = 60, why: str = "") -> None:
    wait_until(lambda: metric_value(srv, name) >= value, seconds, why or f"{name} did not reach {value}")


class Responses:
    """Reads HTTP/1.1 responses (with a Content-Length) off one socket, in
    order, however the bytes are split across recv()s."""

    def __init__(self, s) -> None:
        self.s, self.data = s, b""

    def _fill(self) -> None:
        chunk = self.s.recv(65536)
        assert chunk, self.data
        self.data += chunk

    def next(self) -> tuple[int, bytes]:
        while b"\r\n\r\n" not in self.data:
            self._fill()
        head, _, rest = self.data.partition(b"\r\n\r\n")
        length = next(int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")
                      if l.lower().startswith(b"content-length:"))
        while len(rest) < length:
            self._fill()
            head, _, rest = self.data.partition(b"\r\n\r\n")
        self.data = rest[length:]
        return int(head.split(b" ", 2)[1]), rest[:length]
