"""Small real models for tests: transformers models built from configs with
random weights (nothing downloaded) and a few hand-written blocks."""

from __future__ import annotations

import torch
from transformers import (BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM)


def gpt2(layers=2, hidden=32, heads=2, **over):
    cfg = dict(n_embd=hidden, n_layer=layers, n_head=heads, vocab_size=64, n_positions=64,
               resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cfg.update(over)
    return GPT2LMHeadModel(GPT2Config(**cfg)).eval()


def llama(layers=2, hidden=32, heads=2, **over):
    cfg = dict(hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
               num_attention_heads=heads, num_key_value_heads=heads, vocab_size=64,
               max_position_embeddings=64)
    cfg.update(over)
    return LlamaForCausalLM(LlamaConfig(**cfg)).eval()


def bert(layers=2, hidden=32, heads=2, **over):
    cfg = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
               intermediate_size=hidden * 2, vocab_size=64, max_position_embeddings=64,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    cfg.update(over)
    return BertModel(BertConfig(**cfg)).eval()


class MLP(torch.nn.Module):
    def __init__(self, dim=16, hidden=32):
        super().__init__()
        self.up = torch.nn.Linear(dim, hidden)
        self.down = torch.nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(torch.nn.functional.silu(self.up(x)))


class WithBuffer(torch.nn.Module):
    """A block whose buffer is data (an input), not code."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc = torch.nn.Linear(dim, dim)
        self.register_buffer("scale", torch.ones(dim))

    def forward(self, x):
        return self.fc(x) * self.scale


class RopeBlock(torch.nn.Module):
    """Rotary embedding computed inside forward from a Python float: theta is code here."""

    def __init__(self, dim=16, theta=10000.0):
        super().__init__()
        self.dim, self.theta = dim, theta

    def forward(self, x):
        pos = torch.arange(x.shape[-2], dtype=x.dtype)
        inv = self.theta ** (-torch.arange(0, self.dim, 2, dtype=x.dtype) / self.dim)
        ang = pos[:, None] * inv[None, :]
        return x * torch.cat([ang.cos(), ang.sin()], dim=-1)


class Interleaved(torch.nn.Module):
    """Two block classes interleaved in one ModuleList: not Accelerate's repeated blocks."""

    def __init__(self, dim=16):
        super().__init__()
        self.layers = torch.nn.ModuleList([MLP(dim), WithBuffer(dim), MLP(dim), WithBuffer(dim)])
        self.mlps = torch.nn.ModuleList([MLP(dim) for _ in range(3)])

    def forward(self, x):
        for m in list(self.layers) + list(self.mlps):
            x = m(x)
        return x


class DataDependent(torch.nn.Module):
    """Data-dependent control flow: Dynamo breaks the graph here."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc = torch.nn.Linear(dim, dim)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


class Raises(torch.nn.Module):
    def forward(self, x):
        raise ValueError("this block is broken")


def ids(batch=1, seq=8):
    return torch.randint(0, 64, (batch, seq), generator=torch.Generator().manual_seed(0))
