"""Bundles list every cubin they carry with its ELF arch, and a bundle whose
cubins are for another GPU arch is refused at restore — by the Python layer
and by the C++ client, from the node tier and from a real kcache-server —
with the job falling back to a compile. Real nvcc cubins
(tests/cpp/data/make_cubins.sh); no GPU needed."""

from __future__ import annotations

import json

import pytest

from kc_testing import REPO, ServerProcess
from tiny_job import run, stored_bundles

DATA = REPO / "tests/cpp/data"
KEY = "ab" * 32


def cubin(sm: int) -> bytes:
    return (DATA / f"k_sm{sm}.cubin").read_bytes()


def packed(sm: int) -> bytes:
    from kcache.artifacts import bundle_io
    from kcache._torch_adaptor import Capture

    cap = Capture()
    cap.mega_cache = b"mega-cache bytes"
    cap.binaries = {"triton/k.cubin": cubin(sm), "x/lib.so": b"\x7fELF not cuda"}
    explanation = json.dumps({"label": "Block/cuda:sm_test/f32/default/infer"})
    return bundle_io.pack(KEY, explanation, cap, 1.0)


def test_manifest_lists_each_cubin_with_its_arch():
    from kcache import _core

    manifest = json.loads(_core.inspect_bundle(packed(80))[0])
    assert manifest["cubins"] == [{"name": "inductor/triton/k.cubin", "arch": "sm_80"}]
    manifest = json.loads(_core.inspect_bundle(packed(90))[0])
    assert manifest["cubins"] == [{"name": "inductor/triton/k.cubin", "arch": "sm_90"}]


def test_python_restore_refuses_the_wrong_arch():
    from kcache.artifacts import bundle_io

    blob = packed(80)
    with pytest.raises(bundle_io.WrongArch,
                       match=r"cubin inductor/triton/k\.cubin for sm_80; this device is sm_90"):
        bundle_io.unpack(blob, KEY, target="cuda:sm_90")
    assert bundle_io.unpack(blob, KEY, target="cuda:sm_80").binaries["triton/k.cubin"] == cubin(80)
    assert bundle_io.unpack(blob, KEY, target="cpu:avx2").manifest["cubins"]


def test_sections_are_checked_even_if_the_manifest_does_not_list_them():
    from kcache import _core
    from kcache.artifacts import bundle_io

    manifest = json.dumps({"key": KEY, "label": "x"})  # an older or careless producer
    blob = _core.write_bundle(manifest, [("inductor/k.cubin", cubin(80))])
    with pytest.raises(bundle_io.WrongArch):
        bundle_io.unpack(blob, KEY, target="cuda:sm_90")


def test_a_malformed_cubin_listing_is_corrupt_not_wrong_arch():
    """Only a real arch mismatch is WrongArch (arch_refusals); a listing that
    is not a list of {name, arch} is an ordinary unusable bundle."""
    from kcache import _core
    from kcache.artifacts import bundle_io

    for cubins in ("sm_80", [{"name": "k.cubin"}], [7]):
        manifest = json.dumps({"key": KEY, "label": "x", "cubins": cubins})
        blob = _core.write_bundle(manifest, [("inductor/x", b"payload")])
        with pytest.raises(_core.KcacheError) as e:
            bundle_io.unpack(blob, KEY, target="cuda:sm_90")
        assert not isinstance(e.value, bundle_io.WrongArch)
        assert e.value.code == "corrupt"
        assert bundle_io.unpack(blob, KEY, target="cpu:avx2").binaries == {"x": b"payload"}


def _no_deserialize(_blob):
    raise AssertionError("the Mega-Cache must not be deserialized without CUDA")


def test_listing_the_triton_cubins_never_fails_the_pack(monkeypatch, caplog):
    """triton_cubins: nothing unpickled without CUDA; with CUDA, Mega-Cache
    bytes that do not deserialize (deserialize() returns None), a deserialize
    that raises and an FX entry that does not unpickle each cost only the
    listing, with a warning."""
    import torch
    from torch.compiler._cache import CacheArtifactManager

    from kcache import _torch_adaptor as adaptor
    from kcache.artifacts import bundle_io
    from kcache._torch_adaptor import Capture

    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_available", lambda: False)
        m.setattr(CacheArtifactManager, "deserialize", staticmethod(_no_deserialize))
        assert adaptor.triton_cubins(b"not a mega-cache") == {}

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert CacheArtifactManager.deserialize(b"not a mega-cache") is None
    assert adaptor.triton_cubins(b"not a mega-cache") == {}

    def raises(_blob):
        raise RuntimeError("another torch's format")

    class Entry:
        key, content = "fx-entry", b"not a pickle"

    for deserialize, warned in ((raises, "cannot read the Mega-Cache"),
                                (lambda _blob: {"inductor": [Entry()]}, "FX entry fx-entry")):
        monkeypatch.setattr(CacheArtifactManager, "deserialize", staticmethod(deserialize))
        caplog.clear()
        with caplog.at_level("WARNING", logger="kcache"):
            assert adaptor.triton_cubins(b"bytes") == {}
        assert warned in caplog.text
        cap = Capture()
        cap.mega_cache = b"bytes"
        blob = bundle_io.pack(KEY, json.dumps({"label": "x"}), cap, 1.0)
        assert bundle_io.unpack(blob, KEY, target="cuda:sm_90").manifest["cubins"] == []


def test_put_refuses_a_bundle_this_client_would_refuse(tmp_path):
    """put() stores nowhere, and says so, what get() here would refuse:
    cubins for another arch, or no trusted signature."""
    from kcache import _core

    node = str(tmp_path / "node")
    with pytest.raises(_core.KcacheError, match=r"cubin inductor/triton/k\.cubin for sm_80") as e:
        _core.Client(local_dir=node, target="cuda:sm_90").put(KEY, packed(80))
    assert e.value.code == "key_mismatch"
    assert _core.Client(local_dir=node, target="cuda:sm_80").get(KEY) is None  # not stored
    _priv, pub = _core.generate_signing_key()
    with pytest.raises(_core.KcacheError) as e:
        _core.Client(local_dir=node, trusted_keys=[pub]).put(KEY, packed(90))  # unsigned
    assert _core.Client(local_dir=node).get(KEY) is None


def _get(client, calls):
    def compile_fn():
        calls.append(1)
        return packed(90)

    return client.get_or_compile(KEY, compile_fn)


def test_cpp_client_refuses_node_tier_bundle_for_another_arch(tmp_path):
    from kcache import _core

    node = str(tmp_path / "node")
    # The writer is on an sm_80 GPU too: without a target it would ask this
    # machine's driver, and a put its own get would refuse is an error.
    assert _core.Client(local_dir=node, target="cuda:sm_80").put(KEY, packed(80))
    found = _core.Client(local_dir=node, target="cuda:sm_80").get(KEY)
    assert json.loads(_core.inspect_bundle(found)[0])["cubins"][0]["arch"] == "sm_80"
    calls = []
    right = _core.Client(local_dir=node, target="cuda:sm_80")
    assert _get(right, calls)[1] == "node" and calls == []
    wrong = _core.Client(local_dir=node, target="cuda:sm_90")
    data, source = _get(wrong, calls)
    assert source != "node" and calls == [1]  # compiled here instead
    assert wrong.stats()["refused"] == 1
    assert json.loads(_core.inspect_bundle(data)[0])["cubins"][0]["arch"] == "sm_90"


def test_cpp_client_refuses_server_bundle_for_another_arch(tmp_path):
    from kcache import _core

    server = ServerProcess(tmp_path)
    try:
        assert _core.Client(url=server.url, local_dir="none", target="cuda:sm_80").put(KEY, packed(80))
        calls = []
        right = _core.Client(url=server.url, local_dir="none", target="cuda:sm_80")
        assert _get(right, calls)[1] == "server" and calls == []
        wrong = _core.Client(url=server.url, local_dir="none", target="cuda:sm_90")
        _data, source = _get(wrong, calls)
        assert source == "local" and calls == [1]
        assert wrong.stats()["refused"] == 1
    finally:
        server.stop()


def _plant_cubin(tmp_path, sm: int) -> None:
    """Adds a real cubin to the stored region bundle, listed in its manifest,
    and re-seals it: a valid bundle, as a producer on an sm_<sm> GPU makes."""
    from kcache import _core
    from kcache.artifacts import bundle_io

    [path] = stored_bundles(tmp_path)
    manifest, sections, _ = _core.read_bundle(path.read_bytes(), expected_key=path.name)
    sections = [s for s in sections if not s[0].endswith(".cubin")]
    sections.append((bundle_io.BINARY_PREFIX + "kcache-test/k.cubin", cubin(sm)))
    manifest = json.loads(manifest)
    manifest["cubins"] = json.loads(_core.list_cubins(sections))
    path.write_bytes(_core.write_bundle(json.dumps(manifest), sections))


@pytest.mark.slow
def test_job_restores_matching_arch_and_compiles_on_a_mismatch(tmp_path):
    """A real torch.compile job keyed for cuda:sm_90 (KCACHE_TARGET; the
    region itself runs on CPU here).

    Over a minute: a cold compile, a warm process on the matching arch, and
    a compile on the mismatch."""
    target = {"KCACHE_TARGET": "cuda:sm_90"}
    cold = run(tmp_path, "cold", **target)
    assert cold["kcache"]["compiles"] == 1
    _plant_cubin(tmp_path, 90)
    fits = run(tmp_path, "fits", **target)
    assert fits["kcache"]["hits_node"] == 1 and fits["kcache"]["compiles"] == 0
    assert fits["max_diff"] < 1e-5
    _plant_cubin(tmp_path, 80)
    wrong = run(tmp_path, "wrong", **target)
    assert wrong["kcache"]["hits_node"] == 0 and wrong["kcache"]["compiles"] == 1
    assert wrong["kcache"]["client"]["refused"] == 1
    assert wrong["max_diff"] < 1e-5


def test_an_empty_capture_is_never_packed_as_a_region():
    # A region whose Inductor caches recorded nothing (a bypassed FX-graph
    # cache) would restore nothing: pack refuses it; the ISA-probe entry,
    # binaries only, says so explicitly.
    from kcache.artifacts import bundle_io
    from kcache._torch_adaptor import Capture

    cap = Capture()
    cap.binaries = {"x/lib.so": b"\x7fELF"}
    with pytest.raises(bundle_io.EmptyCapture):
        bundle_io.pack(KEY, json.dumps({"label": "x"}), cap, 1.0)
    blob = bundle_io.pack(KEY, json.dumps({"label": "x"}), cap, 1.0, allow_empty_cache=True)
    assert bundle_io.unpack(blob, KEY).binaries == cap.binaries
