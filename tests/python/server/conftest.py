"""pytest fixtures for the server tests; helpers live in server_harness.py."""

from server_harness import _require_binary, server, start_server  # noqa: F401
