"""Fixtures for the `kcache` CLI tests; the helpers live in cli_harness.py
(a conftest cannot be imported by name: tests/python/server has one too)."""

from __future__ import annotations

import pytest

from cli_harness import CLI_BIN, SERVER_BIN, Server


@pytest.fixture(scope="session", autouse=True)
def _require_binaries():
    for b in (CLI_BIN, SERVER_BIN):
        if not b.exists():
            pytest.skip(f"{b} is not built (set KCACHE_CLI_BIN / KCACHE_SERVER_BIN)")


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path)
    yield s
    assert s.stop() == 0, s.log_path.read_text()[-3000:]
