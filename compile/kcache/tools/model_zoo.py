"""Small transformers causal LMs built from a config (random weights,
nothing downloaded): what prewarm and aoti_prewarm compile, and what
examples/train_regional.py trains, so their region keys match."""

from __future__ import annotations

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
VOCAB = 256
POSITIONS = 128


def build_model(kind: str, layers: int, hidden: int, heads: int,
                dtype: torch.dtype | str = torch.float32, kv_cache: bool = False) -> torch.nn.Module:
    """A transformers causal LM ("gpt2" or "llama") from a small config.

    Random weights, dropout 0, vocabulary 256, 128 positions, no KV cache
    unless kv_cache (the same configuration as examples/train_regional.py
    with heads=2, so its keys match: a KV cache is a call argument of every
    block, so it is part of a precompiled region's key). A stable
    signature: other prewarm formats build models here too.
    """
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if isinstance(dtype, str):
        dtype = DTYPES[dtype]
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(
            n_embd=hidden, n_layer=layers, n_head=heads, vocab_size=VOCAB, n_positions=POSITIONS,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=kv_cache))
    elif kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(
            hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=heads, vocab_size=VOCAB,
            max_position_embeddings=POSITIONS, use_cache=kv_cache))
    else:
        raise ValueError(f"unknown model kind {kind!r} (gpt2, llama)")
    return model.to(dtype)
