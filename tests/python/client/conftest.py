"""pytest fixtures for the client tests; helpers live in client_harness.py."""

from client_harness import client_for, core, server, start_server  # noqa: F401
