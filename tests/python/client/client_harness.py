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


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/python: the harness package
import harness.bundles  # noqa: E402
from harness.server import ServerProcess, clean_env, server_bin  # noqa: E402,F401

SERVER_BIN = server_bin()


def new_key() -> str:
    return secrets.token_hex(32)


def make_bundle(key: str, payload: bytes | None = None, compile_seconds: float = 1.5,
                signing_key_pem: str | None = None) -> bytes:
    return harness.bundles.make_bundle(key, payload, signing_key_pem, payload_bytes=256,
                                       label="ClientTest/cpu:avx2/f32/default/train", compile_seconds=compile_seconds)


class KcacheServer(ServerProcess):
    """One kcache-server process (harness/server.py), no access log."""

    def __init__(self, tmp: pathlib.Path, args: list[str] | None = None, storage: str = "memory:"):
        if not SERVER_BIN.is_file():
            pytest.skip("kcache-server not built (set KCACHE_SERVER_BIN)")
        super().__init__(tmp, storage, ["--access-log", "false", "--drain-timeout-ms", "2000", *(args or [])])


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
