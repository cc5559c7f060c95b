"""Helpers for the `kcache` CLI tests (tests/python/cli): the real CLI binary against the real
kcache-server (disk storage in a temporary directory, random loopback port)
holding real bundles with real key explanations.

Binaries: $KCACHE_CLI_BIN / $KCACHE_SERVER_BIN, else build/dev/cli/kcache and
build/dev/server/kcache-server under the repository root. Bundles and
explanations come from kcache._core (compile/ or the installed package).
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import re
import signal
import ssl
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]

from kcache import _core  # noqa: E402

CLI_BIN = pathlib.Path(os.environ.get("KCACHE_CLI_BIN", REPO / "build/dev/cli/kcache"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/python: the harness package
from harness.server import ServerProcess, server_bin  # noqa: E402

SERVER_BIN = server_bin()

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3

TOOLCHAIN = json.dumps({"artifact": 1, "torch": "2.13.0", "triton": None, "cxx": "g++ 12.2.0", "cuda": None},
                       sort_keys=True)


def key_fields(**overrides: str) -> dict[str, bytes]:
    """The seven key fields of a plausible CPU region; overrides by field name."""
    fields = {
        "schema": "kcache-key-v1",
        "region": "grad=1\nin:param:T[f32;768,768;contig;rg=1;cpu]\nin:act:T[f32;s0,768;contig;rg=1;cpu]\n"
                  "call_function:torch.nn.functional.linear(%1,%0){}\n",
        "dtype": json.dumps({"default": "float32", "autocast": {"cpu": False}}, sort_keys=True),
        "target": json.dumps({"device": "cpu", "isa": "avx512", "threads": 8}, sort_keys=True),
        "mode": json.dumps({"backend": "inductor", "mode": "default", "phase": "train"}, sort_keys=True),
        "toolchain": TOOLCHAIN,
        "env": "{}",
    }
    fields.update(overrides)
    return {k: v.encode() for k, v in fields.items()}


@dataclass
class Artifact:
    key: str
    label: str
    bundle: bytes
    explanation: dict
    compile_seconds: float
    extra: dict = field(default_factory=dict)


def make_artifact(label: str = "GPT2Block/cpu:avx512/f32/default/train", compile_seconds: float = 1.5,
                  payload: bytes = b"", signing_key_pem: str | None = None, **field_overrides: str) -> Artifact:
    """A real bundle: explanation from explain_key, manifest as compile/ writes it."""
    if "region" not in field_overrides:  # unique by default, like distinct regions
        field_overrides["region"] = key_fields()["region"].decode() + f"# {os.urandom(8).hex()}\n"
    explanation = json.loads(_core.explain_key(key_fields(**field_overrides), label))
    key = explanation["key"]
    manifest = {
        "key": key, "label": label, "explanation": explanation, "compile_seconds": compile_seconds,
        "producer": {"host": "node-7", "pid": 4242, "time": 1767225600, "kcache": "0.1.0"},
        "torch_cache_keys": ["fxgraph-abc", "aotautograd-def"],
        "binaries": ["c2/kernel.so"],
    }
    sections = [("torch/mega_cache", payload or os.urandom(256)), ("inductor/c2/kernel.so", os.urandom(128))]
    args = [json.dumps(manifest), sections] + ([signing_key_pem] if signing_key_pem else [])
    return Artifact(key, label, _core.write_bundle(*args), explanation, compile_seconds)


class Server(ServerProcess):
    """One kcache-server (harness/server.py) with disk storage under `data`."""

    def __init__(self, tmp: pathlib.Path, storage: str | None = None, args: list[str] | None = None,
                 tls: "ssl.SSLContext | None" = None):
        self.data = tmp / "data"
        # Exact per-entry hit counts: the hot tier reads through storage at
        # most once a second (docs/protocol.md), so with it on, three quick
        # GETs count as one storage hit.
        super().__init__(tmp, storage or f"disk:{self.data}",
                         ["--drain-timeout-ms", "2000", "--hot-cache-bytes", "0", *(args or [])],
                         tls=tls, wait_healthy=True, log_name="server.log")

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        status, _, data = self.http(method, path, body, headers)
        return status, data

    def put(self, art: Artifact) -> Artifact:
        status, body = self.request("PUT", f"/v1/artifacts/{art.key}", art.bundle)
        assert status == 201, body
        return art

    def keys(self) -> set[str]:
        status, body = self.request("GET", "/v1/entries?limit=1000")
        assert status == 200
        return {e["key"] for e in json.loads(body)["entries"]}

    def object_path(self, key: str) -> pathlib.Path:
        return self.data / "objects" / key[:2] / key  # storage/disk/layout.hpp


def run_cli(*args: str, server: Server | None = None, env: dict | None = None,
            timeout: float = 30) -> subprocess.CompletedProcess:
    """Runs the real kcache binary; KCACHE_URL points at `server` unless env overrides it."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KCACHE_")}
    if server is not None:
        full_env["KCACHE_URL"] = server.url
    full_env.update(env or {})
    return subprocess.run([str(CLI_BIN), *args], capture_output=True, text=True, env=full_env, timeout=timeout)


def cli_json(*args: str, server: Server | None = None, **kw):
    r = run_cli("--json", *args, server=server, **kw)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def columns_aligned(lines: list[str]) -> bool:
    """True when every line of a table starts its columns at the header's offsets.

    A column starts after a run of two or more spaces; right-aligned numbers
    end where their header ends, so the check uses each header word's span.
    """
    header = lines[0]
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    for line in lines[1:]:
        cells = [(m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", line)]
        if len(cells) != len(spans):
            return False
        for (hs, he), (cs, ce) in zip(spans, cells):
            if cs != hs and ce != he:  # neither left- nor right-aligned with its header
                return False
    return True


def value_column(lines: list[str]) -> set[int]:
    """Offsets where the value starts in a "name  value" block."""
    return {re.search(r"\S {2,}(\S)", line).start(1) for line in lines if re.search(r"\S {2,}\S", line)}


# Test modules use these two by importing them: this folder has no
# conftest.py of its own: shared helpers live in uniquely named modules
requires_binaries = pytest.mark.skipif(
    not (CLI_BIN.exists() and SERVER_BIN.exists()),
    reason=f"{CLI_BIN} or {SERVER_BIN} is not built (set KCACHE_CLI_BIN / KCACHE_SERVER_BIN)")


@pytest.fixture
def server(tmp_path):
    """A fresh kcache-server with empty disk storage; must drain and exit 0."""
    s = Server(tmp_path)
    yield s
    assert s.stop() == 0, s.log_path.read_text()[-3000:]
