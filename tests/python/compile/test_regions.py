"""Region detection on real transformers models built from configs."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

import kcache
from kcache.api.regions import find_regions, is_repeated_blocks


def gpt2(layers=3):
    return GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=layers, n_head=2, vocab_size=64, n_positions=32))


def test_gpt2_blocks_are_one_region():
    regions = find_regions(gpt2(4))
    assert [(r.name, r.count, r.path) for r in regions] == [("GPT2Block", 4, "transformer.h.0")]
    assert regions[0].members == [f"transformer.h.{i}" for i in range(4)]
    assert regions[0].parameters == sum(p.numel() for p in gpt2(1).transformer.h[0].parameters())


def test_llama_decoder_layers_are_one_region():
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                         num_attention_heads=2, num_key_value_heads=2, vocab_size=64))
    regions = find_regions(model)
    assert [(r.name, r.count) for r in regions] == [("LlamaDecoderLayer", 3)]


def test_same_class_different_shapes_are_different_regions():
    class Block(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = torch.nn.Linear(d, d)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(8), Block(8), Block(16), Block(16), Block(8)])

    regions = find_regions(Model())
    assert [(r.name, r.count) for r in regions] == [("Block", 3), ("Block#1", 2)]
    assert regions[1].members == ["blocks.2", "blocks.3"]


def test_mixed_modulelist_is_not_repeated():
    assert not is_repeated_blocks(torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.ReLU()]))
    assert not is_repeated_blocks(torch.nn.ModuleList())


def test_report_lists_regions():
    text = kcache.region_report(gpt2(2))
    assert "GPT2Block" in text and "transformer.h.0" in text


def test_compile_regions_matches_accelerate_structure(monkeypatch):
    """Same module tree as accelerate's compile_regions, sharing parameters."""
    from accelerate.utils import compile_regions as accelerate_compile_regions

    monkeypatch.setenv("KCACHE_PRECOMPILED", "1")
    model = gpt2(2)
    ours = kcache.compile_regions(model)
    theirs = accelerate_compile_regions(model)
    assert ours._orig_mod is model
    assert type(ours) is type(theirs)
    ours_names = [n for n, _ in ours.named_modules()]
    assert ours_names == [n for n, _ in theirs.named_modules()]
    assert ours.transformer.h[0]._orig_mod is model.transformer.h[0]
    # Blocks take the precompiled path (a subclass of torch.compile's
    # OptimizedModule with the same _orig_mod layout), or the traced one.
    assert ours.transformer.h[1].__class__.__name__ == "PrecompiledBlock"
    assert isinstance(ours.transformer.h[1], torch._dynamo.eval_frame.OptimizedModule)
    # State-dict keys: the plain model's, where Accelerate's have `_orig_mod.`
    # (a deliberate difference: docs/compatibility.md).
    assert list(ours.state_dict()) == list(model.state_dict())
    assert list(ours.state_dict()) == [k.replace("._orig_mod.", ".") for k in theirs.state_dict()]
    assert all(a is b for a, b in zip(ours.parameters(), model.parameters()))
    assert ours.transformer.h[0].attn is model.transformer.h[0].attn  # attributes read through


@pytest.mark.parametrize("flag", [None, "0", "off"])
def test_precompiled_is_the_default_and_0_keeps_accelerates_module_types(monkeypatch, flag):
    """Precompiled regions are the default again since issue 32's checks
    landed; KCACHE_PRECOMPILED=0 (or off) gives torch.compile's own
    OptimizedModule blocks, as with Accelerate."""
    from accelerate.utils import compile_regions as accelerate_compile_regions

    if flag is None:
        monkeypatch.delenv("KCACHE_PRECOMPILED", raising=False)
    else:
        monkeypatch.setenv("KCACHE_PRECOMPILED", flag)
    model = gpt2(2)
    ours = kcache.compile_regions(model)
    theirs = accelerate_compile_regions(model)
    want = "PrecompiledBlock" if flag is None else "OptimizedModule"
    assert ours.transformer.h[1].__class__.__name__ == want
    if flag is not None:
        assert [type(m).__name__ for m in ours.modules()] == [type(m).__name__ for m in theirs.modules()]


def test_model_without_repeated_blocks_is_compiled_whole(monkeypatch):
    monkeypatch.setenv("KCACHE_PRECOMPILED", "1")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    compiled = kcache.compile_regions(model)
    assert type(compiled).__name__ == "PrecompiledBlock"
    assert compiled._orig_mod is model
    assert find_regions(model) == []
