"""The -march=native query runs once per node: stored in the node tier
directory, asked again when the compiler binary or the CPU flags change,
never stored without a node tier or in a directory others can write."""

from __future__ import annotations

import os
import stat

from kcache.keys import host_facts

from kcache.keys import fields as keyfields


def _fake_cxx(tmp_path, answer="-march=  skylake"):
    log = tmp_path / "calls.log"
    cxx = tmp_path / "fake-g++"
    cxx.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho "  {answer}"\n')
    cxx.chmod(0o755)
    return str(cxx), log


def _calls(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_asked_once_per_node_and_again_when_the_compiler_changes(tmp_path, monkeypatch):
    node = tmp_path / "node"
    node.mkdir(mode=0o700)
    monkeypatch.setenv("KCACHE_LOCAL_DIR", str(node))
    cxx, log = _fake_cxx(tmp_path)
    first = keyfields._native_target_flags.__wrapped__(cxx)  # bypass the per-process cache
    assert _calls(log) == 1
    assert keyfields._native_target_flags.__wrapped__(cxx) == first  # another process, same node
    assert _calls(log) == 1
    assert len(list((node / "host").glob("march-native-*.json"))) == 1
    # Another compiler binary at the same path: asked again, another answer.
    cxx2, _ = _fake_cxx(tmp_path, answer="-march=  icelake-server")
    os.utime(cxx2, ns=(1, 1))
    second = keyfields._native_target_flags.__wrapped__(cxx2)
    assert second != first and _calls(log) == 2


def test_no_node_tier_or_an_untrusted_directory_is_never_used(tmp_path, monkeypatch):
    cxx, log = _fake_cxx(tmp_path)
    monkeypatch.setenv("KCACHE_LOCAL_DIR", "none")
    for _ in range(2):
        keyfields._native_target_flags.__wrapped__(cxx)
    assert _calls(log) == 2
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone could plant an answer here
    monkeypatch.setenv("KCACHE_LOCAL_DIR", str(shared))
    (shared / "host").mkdir()
    for _ in range(2):
        keyfields._native_target_flags.__wrapped__(cxx)
    assert _calls(log) == 4
    assert not list((shared / "host").glob("*.json"))
    assert stat.S_IMODE(shared.stat().st_mode) == 0o777


def test_a_failed_query_is_not_stored(tmp_path, monkeypatch):
    node = tmp_path / "node"
    node.mkdir(mode=0o700)
    monkeypatch.setenv("KCACHE_LOCAL_DIR", str(node))
    assert keyfields._native_target_flags.__wrapped__(str(tmp_path / "no-such-g++")) == "unknown"
    assert not (node / "host").exists() or not list((node / "host").glob("*.json"))
    assert host_facts.node_dir() == node
