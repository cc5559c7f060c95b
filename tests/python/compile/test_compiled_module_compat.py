"""kcache's compiled blocks look like torch.compile's to the ecosystem
(docs/compatibility.md): OptimizedModule instances with `_orig_mod`,
recognised by Accelerate's helpers, with the plain model's state-dict keys
(and either form accepted on load), on the precompiled and traced paths and
for compile_regions_in_place. Nothing here runs a forward: no compile."""

from __future__ import annotations

import copy

import pytest
import torch
from accelerate.utils import extract_model_from_parallel, has_compiled_regions, is_compiled_module
from torch._dynamo.eval_frame import OptimizedModule

import kcache
from kcache.tools.model_zoo import build_model


def model(kind: str = "gpt2") -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(kind, layers=2, hidden=32, heads=2)


@pytest.fixture(params=["precompiled", "traced"])
def path(request, monkeypatch, tmp_path):
    monkeypatch.setenv("KCACHE_PRECOMPILED", "1" if request.param == "precompiled" else "0")
    monkeypatch.setenv("KCACHE_LOCAL_DIR", str(tmp_path / "node"))
    return request.param


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_blocks_are_optimized_modules_with_plain_keys(path, kind):
    m = model(kind)
    c = kcache.compile_regions(m)
    blocks = [b for b in c.modules() if isinstance(b, OptimizedModule)]
    assert blocks and all(b._orig_mod is not None for b in blocks)
    if path == "precompiled":
        assert {type(b).__name__ for b in blocks} == {"PrecompiledBlock"}
    assert has_compiled_regions(c) and not is_compiled_module(c)
    assert extract_model_from_parallel(c, keep_torch_compile=False) is m
    assert extract_model_from_parallel(c, keep_torch_compile=True) is c
    # The state dict a plain model has, key for key and tensor for tensor.
    sd, plain = c.state_dict(), m.state_dict()
    assert list(sd) == list(plain)
    assert all(sd[k] is plain[k] or sd[k].data_ptr() == plain[k].data_ptr() for k in sd)
    # Load: plain keys, and the `_orig_mod.` keys stock torch.compile writes.
    fresh = model(kind).state_dict()
    assert not c.load_state_dict(fresh, strict=True).missing_keys
    wrappers = [n + "." for n, s in c.named_modules() if isinstance(s, OptimizedModule)]

    def with_prefix(k: str) -> str:
        for w in wrappers:
            if k.startswith(w):
                return w + "_orig_mod." + k[len(w):]
        return k

    prefixed = {with_prefix(k): v for k, v in fresh.items()}
    assert any("._orig_mod." in k for k in prefixed)
    assert not c.load_state_dict(prefixed, strict=True).missing_keys
    # Parameter names keep `_orig_mod`, as torch.compile's do.
    assert any("_orig_mod" in n for n, _ in c.named_parameters())


def test_wrapper_passes_attributes_and_training_through(path):
    m = model()
    c = kcache.compile_regions(m)
    block = c.transformer.h[0]
    block.kc_probe = 3  # OptimizedModule: attribute writes reach the block
    assert m.transformer.h[0].kc_probe == 3 and block.kc_probe == 3
    c.eval()
    assert not m.transformer.h[0].training and not block.training
    c.train()
    assert m.transformer.h[0].training


def test_precompiled_block_copies(monkeypatch, tmp_path):
    monkeypatch.setenv("KCACHE_LOCAL_DIR", str(tmp_path / "node"))
    c = kcache.compile_regions(model())
    block = c.transformer.h[0]
    deep = copy.deepcopy(block)
    assert type(deep) is type(block) and deep._orig_mod is not block._orig_mod
    assert deep.__dict__["_kc_region"] is block.__dict__["_kc_region"]
    assert list(deep.state_dict()) == list(block._orig_mod.state_dict())
    shallow = copy.copy(block)
    assert shallow._orig_mod is block._orig_mod
    whole = copy.deepcopy(c)
    assert has_compiled_regions(whole) and list(whole.state_dict()) == list(c.state_dict())
    with pytest.raises(TypeError, match="does not pickle"):
        __import__("pickle").dumps(block)


def test_in_place_keeps_plain_keys(path):
    m = model()
    keys = list(m.state_dict())
    kcache.compile_regions_in_place(m)
    assert list(m.state_dict()) == keys
    # As Accelerate's in-place variants: the blocks are not OptimizedModules.
    assert not has_compiled_regions(m)
