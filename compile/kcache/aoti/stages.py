"""A causal LM as a sequence of AOTInductor stages: embed, each block, head.

PyTorch's regional AOT recipe compiles one decoder block and loads that one
package for every block with the block's own weights. A C++ process also
needs what comes before and after the blocks, so the model is cut into
stages, each an nn.Module over named tensors: GPT-2 is
input_ids -> [embed] -> hidden -> [block]*N -> hidden -> [head] -> logits;
Llama's embed stage also yields the rotary cos/sin every layer takes.

Every stage shares its tensors with the model (no copies); stages whose
graphs are identical (the blocks) get one region key and one package.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class Stage:
    name: str            # "embed", "h.3", "head"
    region_name: str     # the label's region part: "GPT2Block"
    module: nn.Module    # forward(*inputs) -> output or tuple of outputs
    inputs: list[str]
    outputs: list[str]
    example: tuple       # example inputs for torch.export
    dynamic: dict = field(default_factory=dict)  # input name -> {dim: "batch" | "seq"}
    ranges: dict = field(default_factory=dict)   # "batch" / "seq" -> (min, max)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


class _Block(nn.Module):
    """One decoder block over hidden states (causal self-attention, no mask)."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, hidden):
        return _first(self.block(hidden))


class _RotaryBlock(nn.Module):
    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, hidden, cos, sin):
        return _first(self.block(hidden, attention_mask=None, position_embeddings=(cos, sin)))


class _Gpt2Embed(nn.Module):
    def __init__(self, transformer: nn.Module) -> None:
        super().__init__()
        self.wte = transformer.wte
        self.wpe = transformer.wpe

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        return self.wte(input_ids) + self.wpe(positions)[None]


class _LlamaEmbed(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.embed_tokens = inner.embed_tokens
        self.rotary_emb = inner.rotary_emb

    def forward(self, input_ids):
        hidden = self.embed_tokens(input_ids)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        cos, sin = self.rotary_emb(hidden, positions)
        return hidden, cos, sin


class _Head(nn.Module):
    def __init__(self, norm: nn.Module, lm_head: nn.Module) -> None:
        super().__init__()
        self.norm = norm
        self.lm_head = lm_head

    def forward(self, hidden):
        return self.lm_head(self.norm(hidden))


_BS = {0: "batch", 1: "seq"}


def stages_for(model: nn.Module, *, max_batch: int = 16, max_seq: int | None = None) -> list[Stage]:
    """The stages of a transformers GPT-2 or Llama causal LM (eval mode)."""
    kind = type(model).__name__
    cfg = model.config
    max_seq = max_seq or getattr(cfg, "n_positions", None) or cfg.max_position_embeddings
    batch, seq = 2, min(16, max_seq)
    ids = torch.zeros(batch, seq, dtype=torch.long)
    dims = _BS
    ranges = {"batch": (1, max_batch), "seq": (1, max_seq)}
    if kind == "GPT2LMHeadModel":
        tr = model.transformer
        hidden = torch.zeros(batch, seq, cfg.n_embd, dtype=tr.wte.weight.dtype)
        stages = [Stage("embed", "GPT2Embed", _Gpt2Embed(tr), ["input_ids"], ["hidden"], (ids,),
                        {"input_ids": dims}, ranges)]
        stages += [Stage(f"h.{i}", type(b).__name__, _Block(b), ["hidden"], ["hidden"], (hidden,),
                         {"hidden": dims}, ranges) for i, b in enumerate(tr.h)]
        stages.append(Stage("head", "GPT2Head", _Head(tr.ln_f, model.lm_head), ["hidden"],
                            ["logits"], (hidden,), {"hidden": dims}, ranges))
        return stages
    if kind == "LlamaForCausalLM":
        inner = model.model
        dtype = inner.embed_tokens.weight.dtype
        hidden = torch.zeros(batch, seq, cfg.hidden_size, dtype=dtype)
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        cos = torch.zeros(1, seq, head_dim, dtype=dtype)
        rot = {1: "seq"}
        stages = [Stage("embed", "LlamaEmbed", _LlamaEmbed(inner), ["input_ids"],
                        ["hidden", "cos", "sin"], (ids,), {"input_ids": dims}, ranges)]
        stages += [Stage(f"layers.{i}", type(b).__name__, _RotaryBlock(b), ["hidden", "cos", "sin"],
                         ["hidden"], (hidden, cos, cos.clone()),
                         {"hidden": dims, "cos": rot, "sin": rot}, ranges)
                   for i, b in enumerate(inner.layers)]
        stages.append(Stage("head", "LlamaHead", _Head(inner.norm, model.lm_head), ["hidden"],
                            ["logits"], (hidden,), {"hidden": dims}, ranges))
        return stages
    raise ValueError(f"kcache AOTInductor stages know GPT2LMHeadModel and LlamaForCausalLM, "
                     f"not {kind}")


def tensor_names(model: nn.Module) -> dict[int, str]:
    """id(tensor) -> its first name in the model (tied weights share one)."""
    names: dict[int, str] = {}
    for name, t in list(model.named_parameters(remove_duplicate=False)) + \
            list(model.named_buffers(remove_duplicate=False)):
        names.setdefault(id(t), name)
    return names


def model_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (non-persistent ones too) by its first name:
    what the C++ side binds into each stage's package."""
    out: dict[str, torch.Tensor] = {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        out.setdefault(name, t.detach().contiguous())
    return out
