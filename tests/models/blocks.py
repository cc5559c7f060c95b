"""Hand-written blocks beyond GPT-2 and Llama, for the precompiled path's
robustness and mutation tests: each kind is a stack of identical blocks
(a ModuleList, so compile_regions treats it as one region) with an input
maker. Small on purpose: every test compiles them on CPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F

DIM = 16


class ConvBN(torch.nn.Module):
    def __init__(self, ch=4):
        super().__init__()
        self.conv = torch.nn.Conv2d(ch, ch, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(ch)

    def forward(self, x):
        return x + F.relu(self.bn(self.conv(x)))


class MoE(torch.nn.Module):
    """Top-1 routing decided by the data: each token goes to one expert."""

    def __init__(self, dim=DIM, experts=4):
        super().__init__()
        self.gate = torch.nn.Linear(dim, experts)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(experts))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        choice = self.gate(flat).argmax(-1)
        out = torch.zeros_like(flat)
        for i, expert in enumerate(self.experts):
            picked = choice == i
            out[picked] = expert(flat[picked])  # data-dependent shapes
        return x + out.reshape(x.shape)


class MaskedAttention(torch.nn.Module):
    def __init__(self, dim=DIM, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        attn_mask = mask[:, None, None, :].bool()  # padding mask: (b, 1, 1, s)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=attn_mask)
        return x + self.out(y.transpose(1, 2).reshape(b, s, d))


class RelPosBias(torch.nn.Module):
    """Attention scores plus a learned bias per relative distance."""

    def __init__(self, dim=DIM, max_len=16):
        super().__init__()
        self.max_len = max_len
        self.proj = torch.nn.Linear(dim, dim)
        self.bias = torch.nn.Parameter(torch.randn(2 * max_len - 1) * 0.02)

    def forward(self, x):
        s = x.shape[1]
        pos = torch.arange(s, device=x.device)
        rel = pos[None, :] - pos[:, None] + self.max_len - 1
        scores = x @ x.transpose(1, 2) / x.shape[-1] ** 0.5 + self.bias[rel]
        return x + self.proj(scores.softmax(-1) @ x)


class GraphBreak(torch.nn.Module):
    def __init__(self, dim=DIM):
        super().__init__()
        self.lin = torch.nn.Linear(dim, dim)

    def forward(self, x):
        y = self.lin(x)
        torch._dynamo.graph_break()
        return x + y.relu()


class Config:
    def __init__(self, use_gate: bool = True, scale: float = 0.5):
        self.use_gate = use_gate
        self.scale = scale


class ConfigFlag(torch.nn.Module):
    """Reads config values in forward: the graph depends on them."""

    def __init__(self, config: Config, dim=DIM, layer_idx: int = 0):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx  # per-block constant, never read in forward
        self.lin = torch.nn.Linear(dim, dim)
        self.gate = torch.nn.Linear(dim, dim)

    def forward(self, x):
        y = self.lin(x)
        if self.config.use_gate:
            y = y * torch.sigmoid(self.gate(x))
        return x + self.config.scale * y


class WithBuffer(torch.nn.Module):
    def __init__(self, dim=DIM):
        super().__init__()
        self.lin = torch.nn.Linear(dim, dim)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, dim))

    def forward(self, x):
        return x + self.lin(x) * self.scale


class Norm(torch.nn.Module):
    """The mutation suite's base block: eps and activation as attributes."""

    def __init__(self, dim=DIM, eps=1e-5, act="gelu", layer_idx=0):
        super().__init__()
        self.eps = eps
        self.layer_idx = layer_idx
        self.lin = torch.nn.Linear(dim, dim)
        self.act = torch.nn.GELU() if act == "gelu" else torch.nn.SiLU()
        self.register_buffer("shift", torch.zeros(dim))

    def forward(self, x):
        x = F.layer_norm(x, x.shape[-1:], eps=self.eps)
        return x + self.act(self.lin(x)) + self.shift.sum()


class Stack(torch.nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)

    def forward(self, x, *extra):
        for b in self.blocks:
            x = b(x, *extra)
        return x


def _tokens(batch=2, seq=8):
    return (torch.randn(batch, seq, DIM, generator=torch.Generator().manual_seed(3)),)


def _masked():
    x, = _tokens()
    mask = torch.ones(2, 8)
    mask[1, 5:] = 0  # the second sequence is padded
    return x, mask


def _images():
    return (torch.randn(2, 4, 6, 6, generator=torch.Generator().manual_seed(3)),)


# kind -> (stack maker, input maker); three identical blocks each.
KINDS = {
    "conv_bn_train": (lambda: Stack([ConvBN() for _ in range(3)]).train(), _images),
    "conv_bn_eval": (lambda: Stack([ConvBN() for _ in range(3)]).eval(), _images),
    "moe_routing": (lambda: Stack([MoE() for _ in range(3)]), _tokens),
    "padding_mask_attention": (lambda: Stack([MaskedAttention() for _ in range(3)]), _masked),
    "relative_position_bias": (lambda: Stack([RelPosBias() for _ in range(3)]), _tokens),
    "graph_break": (lambda: Stack([GraphBreak() for _ in range(3)]), _tokens),
    "config_flag": (lambda: Stack([ConfigFlag(Config(), layer_idx=i) for i in range(3)]), _tokens),
    "buffer": (lambda: Stack([WithBuffer() for _ in range(3)]), _tokens),
}


class Mlp(torch.nn.Module):
    def __init__(self, dim=DIM):
        super().__init__()
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.down = torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


class CausalAttention(torch.nn.Module):
    def __init__(self, dim=DIM, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        return x + self.out(y.transpose(1, 2).reshape(b, s, d))


class TwoKinds(torch.nn.Module):
    """A language model whose layers alternate two kinds of block, so that
    compile_regions finds two distinct regions of similar size (issue 51:
    regions spread across the ranks of a cold cluster)."""

    def __init__(self, layers=2, dim=DIM):
        super().__init__()
        self.emb = torch.nn.Embedding(256, dim)
        self.attn = torch.nn.ModuleList(CausalAttention(dim) for _ in range(layers))
        self.mlp = torch.nn.ModuleList(Mlp(dim) for _ in range(layers))
        self.head = torch.nn.Linear(dim, 256)

    def forward(self, ids, labels):
        x = self.emb(ids)
        for attn, mlp in zip(self.attn, self.mlp):
            x = mlp(attn(x))
        loss = F.cross_entropy(self.head(x).flatten(0, 1), labels.flatten())
        return type("Output", (), {"loss": loss})()
