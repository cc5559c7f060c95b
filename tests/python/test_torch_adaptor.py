"""The PyTorch adaptor fails loudly when the private APIs it relies on drift:
every entry of its checklist is present on the pinned torch, a missing one
is named by check_torch(), and the precompiled path's guard parsing still
reads the guard text this torch prints."""

from __future__ import annotations

import pytest
import torch

from kcache import _torch_adaptor as adaptor


def test_every_private_api_the_adaptor_uses_is_present():
    missing = [name for name, ok in adaptor._required().items() if not ok]
    assert missing == []
    assert adaptor.torch_version() == adaptor.TESTED_TORCH
    adaptor.check_torch()


def test_a_missing_api_is_named(monkeypatch):
    monkeypatch.setattr(adaptor, "_required", lambda: {"torch._dynamo.aot_compile.X": False})
    with pytest.raises(adaptor.TorchDrift, match="torch._dynamo.aot_compile.X"):
        adaptor.check_torch()


def test_another_torch_version_is_refused_unless_allowed(monkeypatch):
    monkeypatch.setattr(adaptor, "torch_version", lambda: "9.9.9")
    monkeypatch.delenv("KCACHE_ALLOW_UNTESTED_TORCH", raising=False)
    with pytest.raises(adaptor.TorchDrift, match="tested with torch 2.13.0"):
        adaptor.check_torch()
    monkeypatch.setenv("KCACHE_ALLOW_UNTESTED_TORCH", "1")
    adaptor.check_torch()


class _Scaled(torch.nn.Module):
    def __init__(self, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.eps = 1e-3
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * self.layer_idx + self.eps


def test_guarded_constants_are_read_from_this_torchs_guards(tmp_path, monkeypatch):
    """aot_guarded_constants parses PyTorch's printed guard tree: if the
    format drifts, the constants list comes back empty and this fails."""
    from kcache.precompiled import call

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    fn = adaptor.aot_compile_call(call, (_Scaled(2), torch.randn(3, 4)), {}, None, None, None)
    constants = adaptor.aot_guarded_constants(fn, "block")
    assert ".layer_idx" in constants and ".eps" in constants
    assert adaptor.aot_guard_check(fn, _Scaled(2), torch.randn(3, 4))
    assert not adaptor.aot_guard_check(fn, _Scaled(3), torch.randn(3, 4))
    assert "layer_idx" in adaptor.aot_guard_failure(fn, _Scaled(3), torch.randn(3, 4))
    # kcache's bytes drop PyTorch's copies of whole module sources, keep the
    # checksums, and load back into a function that computes the same.
    from kcache import precompiled

    data = adaptor.serialize_aot(fn)
    assert len(data) < len(type(fn).serialize(fn).serialized_data)
    assert all(len(s["sha256"]) == 64 for s in adaptor.inlined_sources(fn))
    again = adaptor.deserialize_aot(data, precompiled._F_GLOBALS)
    block, x = _Scaled(2), torch.randn(3, 4)
    assert torch.equal(adaptor.aot_run(again, block, x), adaptor.aot_run(fn, block, x))
