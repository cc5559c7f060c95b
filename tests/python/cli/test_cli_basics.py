"""Usage, help, version, exit codes and error messages that say what to do."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from cli_harness import (
    EXIT_ERROR, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, requires_binaries, run_cli,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries


def test_help_lists_every_command_and_exit_codes():
    r = run_cli("--help")
    assert r.returncode == EXIT_OK
    for cmd in ("stats", "ls", "inspect", "evict", "rm", "verify", "leases", "explain", "get", "put"):
        assert f"\n  {cmd} " in r.stdout
    assert "Exit codes: 0 ok, 1 error, 2 usage, 3 not found" in r.stdout


def test_version():
    r = run_cli("--version")
    assert r.returncode == EXIT_OK and r.stdout.startswith("kcache ")


@pytest.mark.parametrize("args", [[], ["frobnicate"], ["ls", "--sort", "colour"], ["ls", "--limit", "0"],
                                  ["inspect"], ["evict", "--dry-run"], ["evict", "--max-bytes", "lots"],
                                  ["evict", "--older-than", "soon"], ["explain"], ["inspect", "xyz"],
                                  ["--server", "ftp://example", "stats"], ["--server", "https://h:1", "--cacert", "/nonexistent/ca.pem", "stats"],
                                  ["--server", "https://h:1", "--cert", "/nonexistent/c.pem", "--key", "/nonexistent/k.pem", "stats"]])
def test_usage_errors_exit_2(args, server):
    r = run_cli(*args, server=server)
    assert r.returncode == EXIT_USAGE, (r.stdout, r.stderr)
    assert r.stderr.strip()


def test_unreachable_server_names_the_url_and_what_to_do():
    r = run_cli("--server", "http://127.0.0.1:9", "stats")
    assert r.returncode == EXIT_ERROR
    assert "http://127.0.0.1:9" in r.stderr and "KCACHE_URL" in r.stderr and "--server" in r.stderr


def test_options_may_follow_the_command_and_env_is_read(server):
    r = run_cli("ls", "--json", env={"KCACHE_URL": server.url})
    assert r.returncode == EXIT_OK and json.loads(r.stdout)["entries"] == []


def test_not_found_exit_3(server):
    r = run_cli("inspect", "ab" * 32, server=server)
    assert r.returncode == EXIT_NOT_FOUND and "ab" * 32 in r.stderr


class _Refuser(BaseHTTPRequestHandler):
    """Answers like a kcache-server with tokens would: 401 without, 403 with one."""
    seen: list[str | None] = []

    def _answer(self):
        auth = self.headers.get("Authorization")
        _Refuser.seen.append(auth)
        status, code = (401, "unauthorized") if auth is None else (403, "forbidden")
        body = json.dumps({"error": code, "message": "role admin required"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = do_PUT = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def refuser():
    # No server of this version issues tokens yet (every loopback client has
    # every role), so 401/403 come from this stand-in.
    httpd = HTTPServer(("127.0.0.1", 0), _Refuser)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    _Refuser.seen.clear()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_401_says_to_pass_a_token_and_names_the_role(refuser):
    r = run_cli("--server", refuser, "verify")
    assert r.returncode == EXIT_ERROR
    assert "'admin' role" in r.stderr and "KCACHE_TOKEN" in r.stderr and "--token" in r.stderr
    assert _Refuser.seen == [None]


def test_403_names_the_role_and_token_is_sent_but_never_printed(refuser):
    r = run_cli("--server", refuser, "leases", env={"KCACHE_TOKEN": "s3cret-token"})
    assert r.returncode == EXIT_ERROR
    assert "refused `kcache leases`" in r.stderr and "'admin' role" in r.stderr
    assert _Refuser.seen == ["Bearer s3cret-token"]
    assert "s3cret" not in r.stderr + r.stdout
    r = run_cli("--server", refuser, "--token", "other", "ls")
    assert "'read' role" in r.stderr and _Refuser.seen[-1] == "Bearer other"


def test_starts_instantly_without_python_or_torch():
    # "Instantly" because it is a native binary that loads neither Python
    # nor torch (checked here); its start time is not asserted (a duration
    # bound flakes on a loaded machine).
    import pathlib
    import shutil
    import subprocess
    from cli_harness import CLI_BIN
    assert pathlib.Path(CLI_BIN).read_bytes()[:4] == b"\x7fELF"  # not a script run by an interpreter
    if shutil.which("ldd"):
        libs = subprocess.run(["ldd", str(CLI_BIN)], capture_output=True, text=True).stdout
        assert "python" not in libs and "torch" not in libs, libs
    assert run_cli("--help").returncode == EXIT_OK
