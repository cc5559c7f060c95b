"""Fixtures for the client integration tests: the real kcache-server on a
random loopback port, and kcache._core built from client/python.

The server binary is $KCACHE_SERVER_BIN, else build/dev/server/kcache-server
under the repository root, else /tmp/build-server/server/kcache-server.
kcache._core is imported from compile/ (copy the built _core*.so into
compile/kcache/, the dev convention).
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]

from kcache import _core  # noqa: E402


def _server_bin() -> pathlib.Path | None:
    for candidate in (os.environ.get("KCACHE_SERVER_BIN"), REPO / "build/dev/server/kcache-server",
                      "/tmp/build-server/server/kcache-server"):
        if candidate and pathlib.Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return pathlib.Path(candidate)
    return None


SERVER_BIN = _server_bin()


def new_key() -> str:
    return secrets.token_hex(32)


def make_bundle(key: str, payload: bytes | None = None, compile_seconds: float = 1.5,
                signing_key_pem: str | None = None) -> bytes:
    payload = payload if payload is not None else secrets.token_bytes(256)
    manifest = {"key": key, "label": "ClientTest/cpu:avx2/f32/default/train", "compile_seconds": compile_seconds}
    return _core.write_bundle(json.dumps(manifest), [("mega_cache", payload)], signing_key_pem)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any KCACHE_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCACHE_")}
    env.update(extra)
    return env


class KcacheServer:
    """One kcache-server process; its log goes to a file."""

    def __init__(self, tmp: pathlib.Path, args: list[str] | None = None, storage: str = "memory:"):
        if SERVER_BIN is None:
            pytest.skip("kcache-server not built (set KCACHE_SERVER_BIN)")
        self.log_path = tmp / f"server-{secrets.token_hex(4)}.log"
        cmd = [str(SERVER_BIN), "--listen", "127.0.0.1:0", "--storage", storage, "--access-log", "false",
               "--drain-timeout-ms", "2000"] + (args or [])
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, env=clean_env())
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            self.proc.wait(timeout=5)
            raise RuntimeError(f"server did not start: {line!r}\n{self.log_path.read_text()}")
        host, port = line.split()[-1].rsplit(":", 1)
        self.url = f"http://{host}:{port}"
        self.port = int(port)

    def metrics(self) -> dict[str, float]:
        import urllib.request
        text = urllib.request.urlopen(self.url + "/metrics", timeout=5).read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = out.get(name, 0.0) + float(value)
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


@pytest.fixture
def start_server(tmp_path):
    servers: list[KcacheServer] = []

    def start(*args: str, storage: str = "memory:") -> KcacheServer:
        s = KcacheServer(tmp_path, list(args), storage)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def server(start_server) -> KcacheServer:
    """A memory-backed server whose leases expire after 1.5 s."""
    return start_server("--lease-ttl-ms", "1500")


@pytest.fixture
def core():
    return _core


@pytest.fixture
def client_for(tmp_path):
    """client_for(url, node='a', **kw): a Client with its own node-tier dir."""

    def make(url: str | None, node: str | None = "node", **kw):
        local_dir = str(tmp_path / node) if node else "none"
        kw.setdefault("log_level", "error")
        return _core.Client(url, None, local_dir, **kw)

    return make


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
