"""pytest fixtures for the server tests; helpers live in server_harness.py."""

from server_harness import _require_binary, redis_port, redis_server, redis_url, server, start_server  # noqa: F401
