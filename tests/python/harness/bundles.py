"""Bundles for tests, written by the real bundle writer (kcache._core).

make_bundle(key) is a small, plausible bundle for a given key (the server,
client and RESP tests); cli/cli_harness.py's make_artifact builds on the
same writer with a real key explanation (explain_key) for the CLI's
explain and inspect views.
"""

from __future__ import annotations

import json
import secrets

from kcache import _core

TOOLCHAIN_VALUE = json.dumps({"artifact": 1, "torch": "2.13.0", "triton": None, "cxx": "g++ 12.2.0", "cuda": None})


def new_key() -> str:
    return secrets.token_hex(32)


def manifest_for(key: str, label: str = "GPT2Block/cpu:avx512/f32/default/train", compile_seconds: float = 1.25,
                 toolchain_value: str | None = TOOLCHAIN_VALUE, **extra) -> dict:
    toolchain = {"hash": "ab" * 32, "size": 100}
    if toolchain_value is not None:
        toolchain["value"] = toolchain_value
    m = {
        "key": key,
        "label": label,
        "compile_seconds": compile_seconds,
        "explanation": {"format": "kcache-explanation-v1", "key": key, "label": label,
                        "fields": {"toolchain": toolchain, "region": {"hash": "cd" * 32, "size": 10}}},
        "producer": {"host": "test", "pid": 1, "time": 0, "kcache": "0.1.0"},
    }
    m.update(extra)
    return m


def make_bundle(key: str, payload: bytes | None = None, signing_key_pem: str | None = None,
                payload_bytes: int = 64, **manifest_kw) -> bytes:
    """A bundle for `key`: one mega_cache section (random unless given),
    optionally signed (Ed25519, PEM private key)."""
    payload = payload if payload is not None else secrets.token_bytes(payload_bytes)
    return _core.write_bundle(json.dumps(manifest_for(key, **manifest_kw)), [("mega_cache", payload)],
                              signing_key_pem)
