"""Cache keys from Python: the same key as an independent implementation of
docs/keys.md, and explanations that name exactly the fields that differ."""

import hashlib
import json
import struct

import pytest
from kcache import _core

FIELDS = ["schema", "region", "dtype", "target", "mode", "toolchain", "env"]


def reference_key(fields: dict[str, bytes]) -> str:
    """docs/keys.md, written out again with hashlib: a second implementation."""
    h = hashlib.sha256(b"kcache.cachekey\n")
    for tag, name in enumerate(FIELDS, start=1):
        value = fields[name]
        h.update(bytes([tag]) + struct.pack("<I", len(name)) + name.encode()
                 + struct.pack("<Q", len(value)) + value)
    return h.hexdigest()


def sample(**over):
    f = {"region": b"0=in:act:T[float32;2,3;contig;rg=0;cpu]", "dtype": b'{"default":"float32"}',
         "target": b'{"device":"cpu","isa":"avx2"}', "mode": b'{"mode":"default"}',
         "toolchain": b'{"torch":"2.13.0"}', "env": b"{}"}
    f.update(over)
    return f


def test_same_key_as_independent_implementation():
    fields = sample()
    key = _core.compute_key(fields)
    assert key == reference_key({"schema": _core.KEY_SCHEMA.encode(), **fields})
    assert _core.is_key(key)


def test_binary_field_values_round_trip():
    fields = sample(region=bytes(range(256)) * 4)
    assert _core.compute_key(fields) == reference_key({"schema": _core.KEY_SCHEMA.encode(), **fields})


def test_each_field_changes_the_key():
    base = _core.compute_key(sample())
    for name in FIELDS[1:]:
        assert _core.compute_key(sample(**{name: sample()[name] + b"x"})) != base, name


def test_errors_are_kcache_errors_with_codes():
    with pytest.raises(_core.KcacheError) as e:
        _core.compute_key(sample(dtype=b""))
    assert e.value.code == "invalid_argument"
    with pytest.raises(_core.KcacheError):
        _core.compute_key({**sample(), "bogus": b"1"})
    with pytest.raises(_core.KcacheError):
        _core.explain_key(sample(), "has space")


def test_explanation_and_diff():
    a = json.loads(_core.explain_key(sample(), "Block/cpu/f32/default/train", {"region": "3 ops"}))
    assert a["key"] == _core.compute_key(sample())
    assert a["fields"]["region"]["detail"] == "3 ops"
    b_text = _core.explain_key(sample(target=b'{"device":"cpu","isa":"avx512"}', env=b'{"OMP_NUM_THREADS":"2"}'),
                               "Block/cpu/f32/default/train")
    assert _core.diff_explanations(json.dumps(a), b_text) == ["target", "env"]
    assert _core.diff_explanations(json.dumps(a), json.dumps(a)) == []
