"""Bundles through the binding: round trip, hostile bytes, signatures, cubins."""

import json
import pathlib

import pytest
from kcache import _core

KEY = "ab" * 32
DATA = pathlib.Path(__file__).resolve().parents[2] / "cpp" / "data"


def make(sections=None, signer=None, key=KEY):
    return _core.write_bundle(json.dumps({"key": key, "label": "L"}),
                              sections or [("torch/mega_cache", b"x" * 1000), ("inductor/a/b.so", b"\x7fELF")],
                              signer)


def test_round_trip():
    manifest, sections, signer = _core.read_bundle(make(), expected_key=KEY)
    assert json.loads(manifest)["label"] == "L"
    assert sections == [("torch/mega_cache", b"x" * 1000), ("inductor/a/b.so", b"\x7fELF")]
    assert signer is None


@pytest.mark.parametrize("mutate,code", [
    (lambda b: b[: len(b) // 2], "truncated"),
    (lambda b: b"XX" + b[2:], "bad_magic"),
    (lambda b: b[:-40] + bytes([b[-40] ^ 1]) + b[-39:], "corrupt"),
    (lambda b: b"", "truncated"),
])
def test_hostile_bytes_are_clear_errors(mutate, code):
    with pytest.raises(_core.KcacheError) as e:
        _core.read_bundle(mutate(make()), expected_key=KEY)
    assert e.value.code == code


def test_key_mismatch():
    with pytest.raises(_core.KcacheError) as e:
        _core.read_bundle(make(), expected_key="cd" * 32)
    assert e.value.code == "key_mismatch"


def test_signatures():
    priv, pub = _core.generate_signing_key()
    _, other_pub = _core.generate_signing_key()
    signed = make(signer=priv)
    _, _, signer = _core.read_bundle(signed, expected_key=KEY, trusted_keys=[pub], require_signature=True)
    assert signer
    with pytest.raises(_core.KcacheError) as e:
        _core.read_bundle(signed, trusted_keys=[other_pub], require_signature=True)
    assert e.value.code == "bad_signature"
    with pytest.raises(_core.KcacheError) as e:
        _core.read_bundle(make(), trusted_keys=[pub], require_signature=True)
    assert e.value.code == "bad_signature"


def test_cubin_arch_from_real_nvcc_cubins():
    assert _core.cubin_sm_arch((DATA / "k_sm80.cubin").read_bytes()) == 80
    assert _core.cubin_sm_arch((DATA / "k_sm90.cubin").read_bytes()) == 90
    with pytest.raises(_core.KcacheError):
        _core.cubin_sm_arch(b"\x7fELF" + b"\0" * 10)
