"""kcache explain names the one key field a test changed."""

from __future__ import annotations

import json

import pytest

from cli_harness import (
    EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, cli_json, key_fields, make_artifact, requires_binaries,
    run_cli,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries

REGION = key_fields()["region"].decode()
LABEL = "GPT2Block/cpu:avx512/f32/default/train"
AVX2 = json.dumps({"device": "cpu", "isa": "avx2", "threads": 8}, sort_keys=True)


@pytest.fixture
def pair(server):
    stored = server.put(make_artifact(LABEL, region=REGION))
    rank3 = make_artifact(LABEL, region=REGION, target=AVX2)  # what rank 3 computed
    return stored, rank3


def test_two_stored_keys(server, pair):
    stored, rank3 = pair
    server.put(rank3)
    r = run_cli("explain", stored.key, rank3.key[:16], server=server)
    assert r.returncode == EXIT_OK, r.stderr
    assert "1 of 7 key fields differ:" in r.stdout
    table = r.stdout.split("differ:\n")[1].splitlines()
    assert table[0].split() == ["FIELD", "LEFT", "RIGHT"]
    assert len(table) == 2 and table[1].split()[0] == "target"
    assert '"isa": "avx512"' in table[1] and '"isa": "avx2"' in table[1]
    j = cli_json("explain", stored.key, rank3.key, server=server)
    assert [d["field"] for d in j["differing"]] == ["target"] and j["same_key"] is False
    assert j["differing"][0]["right"]["value"] == AVX2


def test_two_files(server, tmp_path, pair):
    stored, rank3 = pair
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(stored.explanation))
    b.write_text(json.dumps(rank3.explanation))
    j = cli_json("explain", "--file", str(a), "--file", str(b), server=server)
    assert [d["field"] for d in j["differing"]] == ["target"]
    j = cli_json("explain", stored.key, "--file", str(b), server=server)  # a stored key against a file
    assert [d["field"] for d in j["differing"]] == ["target"]
    j = cli_json("explain", "--file", str(a), "--file", str(a), server=server)
    assert j["same_key"] is True and j["differing"] == []


def test_miss_record_against_stored_entries_of_its_label(server, tmp_path, pair):
    stored, rank3 = pair
    other = server.put(make_artifact("GPT2MLP/cpu:avx512/f32/default/train", region=REGION, mode="{}"))
    assert other.key != stored.key
    # A miss log: JSON lines; the last record is rank 3's miss.
    log = tmp_path / "misses.jsonl"
    log.write_text(json.dumps({"event": "miss", "key": "0" * 64, "explanation": json.dumps(other.explanation)}) +
                   "\n" + json.dumps({"event": "miss", "key": rank3.key, "explanation": rank3.explanation}) + "\n")
    r = run_cli("explain", "--file", str(log), server=server)
    assert r.returncode == EXIT_OK, r.stderr
    assert f"subject  {rank3.key}" in r.stdout
    assert f"{stored.key[:12]}  {LABEL}  target" in r.stdout
    assert "1 of 7 key fields differ:" in r.stdout
    j = cli_json("explain", "--file", str(log), server=server)
    assert j["subject_stored"] is False
    assert [(c["key"], [d["field"] for d in c["differing"]]) for c in j["candidates"]] == [(stored.key, ["target"])]


def test_explain_exit_codes(server, tmp_path, pair):
    stored, rank3 = pair
    assert run_cli("explain", stored.key, "9" * 64, server=server).returncode == EXIT_NOT_FOUND
    lonely = tmp_path / "lonely.json"
    lonely.write_text(json.dumps(make_artifact("Unseen/cpu:avx512/f32/default/train").explanation))
    r = run_cli("explain", "--file", str(lonely), server=server)
    assert r.returncode == EXIT_NOT_FOUND and "Unseen/cpu:avx512/f32/default/train" in r.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("{\"not\": \"an explanation\"}")
    assert run_cli("explain", "--file", str(junk), server=server).returncode == EXIT_USAGE
    assert run_cli("explain", "a" * 64, "b" * 64, "c" * 64, server=server).returncode == EXIT_USAGE


def test_check_failure_record_written_by_the_client(server, tmp_path, pair):
    """A precompiled region found but refused (issue 32): the client's own
    note_check_failure writes the record; explain says it was found, not
    used, and why, in both forms."""
    from kcache import _core

    stored, _ = pair
    client = _core.Client(url=server.url, local_dir=str(tmp_path / "node"))
    failure = "G['__import_m'].FLAG (CONSTANT_MATCH): compiled with [\"bool\", \"False\"], now [\"bool\", \"True\"]"
    client.note_check_failure(stored.key, json.dumps(stored.explanation), [failure])
    log = tmp_path / "node" / "misses.jsonl"
    record = json.loads(log.read_text().splitlines()[-1])
    assert record["kind"] == "check_failure" and record["check_failures"] == [failure]
    assert record["key"] == stored.key and record["explanation"]["key"] == stored.key
    r = run_cli("explain", "--file", str(log), server=server)
    assert r.returncode == EXIT_OK, r.stderr
    assert "found, but not used" in r.stdout and failure in r.stdout
    assert "this key is stored now" in r.stdout
    j = cli_json("explain", "--file", str(log), server=server)
    assert j["subject_stored"] is True and j["subject"]["check_failures"] == [failure]
    # A plain miss record carries none.
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"key": stored.key, "explanation": stored.explanation}))
    assert "found, but not used" not in run_cli("explain", "--file", str(plain), server=server).stdout
