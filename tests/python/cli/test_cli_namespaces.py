"""The CLI in namespaces (docs/namespaces.md, docs/cli.md): --namespace
(and KCACHE_NAMESPACE) picks where ls, stats, evict, rm, pin and unpin act;
stats lists every namespace the token may read with its quota; ls --sort
value puts the most valuable entry first; a foreign namespace is refused."""

from __future__ import annotations

import json

from cli_harness import EXIT_ERROR, EXIT_OK, Server, cli_json, make_artifact, run_cli

TOKEN_A = "cli-team-a-admin-token-01"
TOKEN_B = "cli-team-b-admin-token-01"


def start(tmp_path) -> Server:
    f = tmp_path / "ns.json"
    f.write_text(json.dumps({"namespaces": {
        "team-a": {"tokens": [{"token": TOKEN_A, "role": "admin"}], "quota_bytes": "1GiB"},
        "team-b": {"tokens": [{"token": TOKEN_B, "role": "admin"}], "retention": {"policy": "lru"}},
    }}))
    return Server(tmp_path, args=["--namespaces", str(f)])


def put(srv: Server, token: str, art) -> None:
    status, body = srv.http("PUT", f"/v1/artifacts/{art.key}", art.bundle,
                            {"Authorization": f"Bearer {token}", "Content-Type": "application/octet-stream"})[:3:2]
    assert status == 201, body


def test_namespace_option_scopes_every_command(tmp_path):
    srv = start(tmp_path)
    try:
        cheap = make_artifact(label="Cheap/cpu", compile_seconds=1.0)
        dear = make_artifact(label="Dear/cpu", compile_seconds=90.0)
        other = make_artifact(label="TeamB/cpu")
        put(srv, TOKEN_A, cheap)
        put(srv, TOKEN_A, dear)
        put(srv, TOKEN_B, other)
        a = {"KCACHE_TOKEN": TOKEN_A}
        listing = cli_json("ls", "--sort", "value", server=srv, env=a)["entries"]
        assert [e["label"] for e in listing] == ["Dear/cpu", "Cheap/cpu"]
        assert listing[0]["value"] > listing[1]["value"] and listing[0]["pinned"] is False
        # The same listing with the namespace named, by option and by variable.
        assert {e["key"] for e in cli_json("--namespace", "team-a", "ls", server=srv, env=a)["entries"]} == \
            {cheap.key, dear.key}
        assert {e["key"] for e in cli_json("ls", server=srv, env={**a, "KCACHE_NAMESPACE": "team-a"})["entries"]} == \
            {cheap.key, dear.key}
        # Team A's token in team B's namespace: refused, nothing listed.
        r = run_cli("--namespace", "team-b", "ls", server=srv, env=a)
        assert r.returncode == EXIT_ERROR and "team-b" in r.stderr, r.stderr
        # stats: this namespace and its quota.
        s = cli_json("stats", server=srv, env=a)
        assert s["namespace"] == "team-a"
        assert [(n["name"], n["entries"], n["quota_bytes"]) for n in s["namespaces"]] == [("team-a", 2, 1 << 30)]
        table = run_cli("stats", server=srv, env=a)
        assert table.returncode == EXIT_OK and "namespaces" in table.stdout and "1.0 GiB" in table.stdout
        # pin, then evict everything by value: the pinned entry stays; team B untouched.
        r = run_cli("pin", dear.key[:10], server=srv, env=a)
        assert r.returncode == EXIT_OK and "pinned" in r.stdout, r.stderr
        ev = cli_json("evict", "--max-bytes", "0", "--order", "value", server=srv, env=a)
        assert ev["keys"] == [cheap.key]
        assert [e["key"] for e in cli_json("ls", server=srv, env=a)["entries"]] == [dear.key]
        assert [e["key"] for e in cli_json("ls", server=srv, env={"KCACHE_TOKEN": TOKEN_B})["entries"]] == [other.key]
        assert run_cli("unpin", dear.key, server=srv, env=a).returncode == EXIT_OK
        assert cli_json("ls", server=srv, env=a)["entries"][0]["pinned"] is False
    finally:
        assert srv.stop() == 0


def test_explain_says_a_hit_comes_through_a_link(tmp_path):
    """kcache explain in a namespace that reads through to another: the
    stored side names the namespace it comes from, and a miss record of a
    key stored there says a lookup hits through the link."""
    f = tmp_path / "ns.json"
    f.write_text(json.dumps({"namespaces": {
        "ci": {"tokens": [{"token": "cli-ci-writer-token-0001", "role": "write"}]},
        "team-b": {"tokens": [{"token": TOKEN_B, "role": "admin"}], "read_through": ["ci"]},
    }}))
    srv = Server(tmp_path, args=["--namespaces", str(f)])
    try:
        art = make_artifact(label="GPT2Block/cpu:avx512/f32/default/train")
        put(srv, "cli-ci-writer-token-0001", art)
        b = {"KCACHE_TOKEN": TOKEN_B}
        # Two sides, one a read-through entry: its source says so.
        other = make_artifact(label=art.label, target='{"device": "cpu", "isa": "avx2", "threads": 8}')
        miss = tmp_path / "miss.json"
        miss.write_text(json.dumps(other.explanation))
        r = run_cli("explain", art.key, "--file", str(miss), server=srv, env=b)
        assert r.returncode == EXIT_OK, r.stderr
        assert "namespace ci, read through" in r.stdout and "target" in r.stdout, r.stdout
        # A miss record of the key itself: stored through the link.
        same = tmp_path / "same.json"
        same.write_text(json.dumps(art.explanation))
        r = run_cli("explain", "--file", str(same), server=srv, env=b)
        assert "stored now in namespace ci" in r.stdout, (r.returncode, r.stdout, r.stderr)
        # Team B's own listing does not hold it (read-only link).
        assert cli_json("ls", server=srv, env=b)["entries"] == []
    finally:
        assert srv.stop() == 0
