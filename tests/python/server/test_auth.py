"""Bearer-token auth (--tokens, --anonymous-read): every route with no token,
a wrong token and each role → the expected 401 / 403 / 2xx; token reloads on
SIGHUP; the non-loopback refusal; tokens never logged."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import time

import pytest

from server_harness import SERVER_BIN, KcacheServer, make_bundle, new_key

ROLES = ("read", "write", "admin")
RANK = {"none": 0, "read": 1, "write": 2, "admin": 3}
TOKENS = {role: f"{role}-{secrets.token_urlsafe(24)}" for role in ROLES}
WRONG = "wrong-" + secrets.token_urlsafe(24)


def bearer(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


def write_tokens(path, tokens: dict[str, str]) -> None:
    lines = ["# kcache tokens: TOKEN ROLE"] + [f"{t} {role}" for role, t in tokens.items()]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def authed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auth")
    tokens_file = tmp / "tokens"
    write_tokens(tokens_file, TOKENS)
    s = KcacheServer(tmp, args=["--tokens", str(tokens_file)])
    yield s
    log = s.read_log()
    assert s.stop() == 0
    for t in list(TOKENS.values()) + [WRONG]:
        assert t not in log, "a token reached the log"


ADMIN = bearer(TOKENS["admin"])


def stored_key(srv) -> str:
    key = new_key()
    assert srv.put_artifact(key, make_bundle(key), headers=ADMIN).status == 201
    return key


def leased_key(srv) -> tuple[str, str]:
    key = new_key()
    r = srv.request("POST", f"/v1/leases/{key}", headers=ADMIN)
    assert r.status == 201
    return key, r.json()["lease"]


# Each case: name, needed role, setup(srv) → (method, path, body, extra headers), statuses that mean "served".
def _get(path):
    return lambda srv: ("GET", path, None, {})


def _artifact(method):
    def setup(srv):
        return method, f"/v1/artifacts/{stored_key(srv)}", None, {}
    return setup


def _put(srv):
    key = new_key()
    return "PUT", f"/v1/artifacts/{key}", make_bundle(key), {"Content-Type": "application/octet-stream"}


def _renew(srv):
    key, lease = leased_key(srv)
    return "POST", f"/v1/leases/{key}/renew", None, {"X-Kcache-Lease": lease}


def _release(srv):
    key, lease = leased_key(srv)
    return "DELETE", f"/v1/leases/{key}", None, {"X-Kcache-Lease": lease}


CASES = [
    ("healthz", "none", _get("/healthz"), {200}),
    ("readyz", "none", _get("/readyz"), {200}),
    ("metrics", "none", _get("/metrics"), {200}),
    ("stats", "read", _get("/v1/stats"), {200}),
    ("get artifact", "read", _artifact("GET"), {200}),
    ("head artifact", "read", _artifact("HEAD"), {200}),
    ("entries", "read", _get("/v1/entries"), {200}),
    ("entry", "read", lambda srv: ("GET", f"/v1/entries/{stored_key(srv)}", None, {}), {200}),
    ("put artifact", "write", _put, {201}),
    ("acquire lease", "write", lambda srv: ("POST", f"/v1/leases/{new_key()}", None, {}), {201}),
    ("renew lease", "write", _renew, {200}),
    ("release lease", "write", _release, {204}),
    ("cold-start report", "write",
     lambda srv: ("POST", "/v1/cold-start", b'{"eager_block_calls": 1}', {"Content-Type": "application/json"}),
     {204}),
    ("list leases", "admin", _get("/v1/leases"), {200}),
    ("delete artifact", "admin", _artifact("DELETE"), {204}),
    ("evict", "admin", lambda srv: ("POST", "/v1/evict", json.dumps({"max_bytes": "1T", "dry_run": True}).encode(), {}),
     {200}),
    ("verify", "admin", lambda srv: ("POST", "/v1/verify", None, {}), {200}),
]
CREDENTIALS = ["no token", "wrong token", "read", "write", "admin"]


def expected_status(needed: str, cred: str, ok: set[int]) -> set[int]:
    if needed == "none":
        return ok
    if cred in ("no token", "wrong token"):
        return {401}
    return ok if RANK[cred] >= RANK[needed] else {403}


@pytest.mark.parametrize("cred", CREDENTIALS)
@pytest.mark.parametrize("name,needed,setup,ok", CASES, ids=[c[0] for c in CASES])
def test_route_role_matrix(authed, name, needed, setup, ok, cred):
    method, path, body, headers = setup(authed)
    token = {"no token": None, "wrong token": WRONG}.get(cred, TOKENS.get(cred))
    r = authed.request(method, path, body=body, headers={**headers, **bearer(token)})
    assert r.status in expected_status(needed, cred, ok), (name, cred, r.status, r.body[:200])
    if r.status == 401:
        assert r.headers["www-authenticate"].startswith('Bearer realm="kcache"')
        if method != "HEAD":
            assert r.json()["error"] == "unauthorized"
    if r.status == 403 and method != "HEAD":
        assert r.json()["error"] == "forbidden"
        assert needed in r.json()["message"]


def test_refused_put_stores_nothing(authed):
    key = new_key()
    r = authed.put_artifact(key, make_bundle(key), headers=bearer(TOKENS["read"]))
    assert r.status == 403
    assert authed.request("HEAD", f"/v1/artifacts/{key}", headers=ADMIN).status == 404


# Ids name the cases: the tokens are random per process, and pytest-xdist's
# workers must collect the same test names.
@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "bearer " + WRONG, TOKENS["admin"]],
                         ids=["basic", "bearer-alone", "bearer-space", "lowercase-wrong-token", "token-no-scheme"])
def test_malformed_or_unknown_authorization_is_401(authed, header):
    r = authed.get("/v1/stats", headers={"Authorization": header})
    assert r.status == 401 and "www-authenticate" in r.headers


def test_scheme_is_case_insensitive(authed):
    r = authed.get("/v1/stats", headers={"Authorization": "bEaReR " + TOKENS["read"]})
    assert r.status == 200


def test_anonymous_read(start_server, tmp_path):
    tokens_file = tmp_path / "tokens"
    write_tokens(tokens_file, TOKENS)
    srv = start_server(args=["--tokens", str(tokens_file), "--anonymous-read"])
    key = stored_key(srv)
    assert srv.get(f"/v1/artifacts/{key}").status == 200
    assert srv.get("/v1/stats").status == 200
    # Writing and administration still need a token; a wrong token is still refused.
    assert srv.put_artifact(new_key(), make_bundle(new_key())).status == 401
    assert srv.get("/v1/leases").status == 401
    assert srv.get(f"/v1/artifacts/{key}", headers=bearer(WRONG)).status == 401


def test_sighup_reloads_tokens(start_server, tmp_path):
    tokens_file = tmp_path / "tokens"
    write_tokens(tokens_file, TOKENS)
    srv = start_server(args=["--tokens", str(tokens_file)])
    assert srv.get("/v1/stats", headers=bearer(TOKENS["read"])).status == 200
    fresh = "fresh-" + secrets.token_urlsafe(24)
    write_tokens(tokens_file, {"admin": fresh})
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "SIGHUP: reload done")
    assert "reloaded tokens" in srv.read_log()
    assert srv.get("/v1/leases", headers=bearer(fresh)).status == 200
    assert srv.get("/v1/stats", headers=bearer(TOKENS["read"])).status == 401
    # A broken file keeps the tokens in force.
    tokens_file.write_text("not-a-valid-line\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_for_log(srv, "tokens not reloaded")
    assert srv.get("/v1/leases", headers=bearer(fresh)).status == 200
    assert fresh not in srv.read_log()


def wait_for_log(srv, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in srv.read_log():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not logged:\n{srv.read_log()[-2000:]}")


def run_server(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(SERVER_BIN), "--storage", "memory:", *args], capture_output=True, timeout=10,
                          input=b"")


def test_non_loopback_needs_tokens(tmp_path):
    r = run_server(["--listen", "0.0.0.0:0"])
    assert r.returncode == 2 and b"without authentication" in r.stderr


def test_non_loopback_with_tokens_starts(start_server, tmp_path):
    tokens_file = tmp_path / "tokens"
    write_tokens(tokens_file, TOKENS)
    srv = start_server(args=["--listen", "0.0.0.0:0", "--tokens", str(tokens_file)])
    assert srv.host == "0.0.0.0"
    srv.host = "127.0.0.1"
    assert srv.get("/v1/stats").status == 401
    assert srv.get("/v1/stats", headers=bearer(TOKENS["read"])).status == 200


@pytest.mark.parametrize("content,needle", [
    ("short read\n", b"line 1"),
    ("x" * 20 + " superuser\n", b"role must be read, write or admin"),
    ("# nothing\n", b"no tokens"),
    (("y" * 20 + " read\n") * 2, b"duplicate token"),
])
def test_bad_tokens_file_is_a_config_error(tmp_path, content, needle):
    f = tmp_path / "tokens"
    f.write_text(content)
    r = run_server(["--listen", "127.0.0.1:0", "--tokens", str(f)])
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert b"x" * 20 not in r.stderr and b"y" * 20 not in r.stderr


def test_anonymous_read_needs_tokens():
    r = run_server(["--anonymous-read"])
    assert r.returncode == 2 and b"--anonymous-read needs --tokens" in r.stderr
