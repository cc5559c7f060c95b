"""The device-index rule (docs/keys.md, "Device indices") with faked CUDA
devices on a machine without a GPU: a region whose inputs are on cuda:0 is
keyed (by arch, never by index) and cached; the same region on cuda:1 —
whose fingerprint and key fields are identical, which is why the rule
exists — is never keyed, fetched or restored: it compiles as stock PyTorch
would and is counted as bypassed.

The inputs are FakeTensors that report cuda:N (no CUDA needed); Inductor's
compile itself is replaced by a recorder, since there is no Triton here:
what is under test is kcache's decision, made before Inductor runs. The
recorder stands in for Inductor's cache too: it records a placeholder entry,
so the cuda:0 region has a bundle to store (an empty capture is not stored)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import kcache
from kcache import _core
from kcache.state import counters
from kcache import _torch_adaptor as adaptor
from kcache.api import last_keys
from kcache.traced.backend import RegionBackend
from kcache.keys.fields import CompileSettings
from kcache.keys.graph_key import region_key


class Block(torch.nn.Module):
    def forward(self, x, w):
        return torch.nn.functional.gelu(x @ w) + 1.0


def fake_inputs(mode, device):
    with mode:
        return [torch.empty(4, 8, device=device), torch.empty(8, 8, device=device)]


@pytest.fixture
def faked_gpu(monkeypatch):
    monkeypatch.delenv("KCACHE_TARGET", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    compiled = []
    capturing: list[adaptor.Capture] = []

    def recording_compile(gm, example_inputs, patches):
        compiled.append(str(example_inputs[0].device))
        for cap in capturing:
            cap.mega_cache = b"placeholder: what Inductor's caches would have recorded"
        return gm.forward

    @contextlib.contextmanager
    def recording_capture():
        capturing.append(adaptor.Capture())
        try:
            yield capturing[-1]
        finally:
            capturing.pop()

    monkeypatch.setattr(adaptor, "compile_with_inductor", recording_compile)
    monkeypatch.setattr(adaptor, "capture_region", recording_capture)
    counters.reset()
    return compiled


def test_cuda1_is_never_keyed_nor_restored(tmp_path, faked_gpu):
    gm = torch.fx.symbolic_trace(Block())
    mode = FakeTensorMode()
    on0, on1 = fake_inputs(mode, "cuda:0"), fake_inputs(mode, "cuda:1")
    # Why the rule: the index is in neither the region nor the target field.
    key0, explanation0 = region_key(gm, on0, "Block", CompileSettings())
    assert region_key(gm, on1, "Block", CompileSettings())[0] == key0
    assert "cuda:sm_90" in explanation0

    store = _core.Client(local_dir=str(tmp_path / "node"))
    backend = RegionBackend("Block", CompileSettings(), store)
    before = last_keys()
    backend(gm, on0)  # cuda:0: keyed, compiled once, stored
    assert last_keys()[len(before):] == [key0]
    assert store.get(key0) is not None
    assert faked_gpu == ["cuda:0"]
    node_hits = store.stats()["node_hits"]

    backend(gm, on1)  # cuda:1: the stored cuda:0 bundle must not be restored
    stats = kcache.stats()
    assert stats["bypassed"] == 1
    assert stats["hits_node"] == 0 and stats["reuses"] == 0
    assert last_keys()[len(before):] == [key0]  # nothing keyed for cuda:1
    assert faked_gpu == ["cuda:0", "cuda:1"]  # compiled as stock PyTorch would
    assert store.stats()["node_hits"] == node_hits  # not even looked up


def test_any_nonzero_input_bypasses(tmp_path, faked_gpu):
    gm = torch.fx.symbolic_trace(Block())
    mode = FakeTensorMode()
    mixed = [fake_inputs(mode, "cuda:0")[0], fake_inputs(mode, "cuda:3")[1]]
    store = _core.Client(local_dir=str(tmp_path / "node"))
    before = last_keys()
    RegionBackend("Block", CompileSettings(), store)(gm, mixed)
    assert kcache.stats()["bypassed"] == 1
    assert last_keys() == before
