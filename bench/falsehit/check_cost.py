"""What the portable guard checks cost (docs/precompiled.md "Guards"): for
one GPT-2 and one Llama block (transformers, built from configs), how many
checks a region records, their bytes in the bundle, and the time to check a
block's live objects: the first block of a region (classes described) and
each further block (class descriptions shared by the region).

    .venv/bin/python bench/falsehit/check_cost.py   # writes check_cost.json here
"""

from __future__ import annotations

import json
import pathlib
import time

import torch
from transformers import GPT2Config, GPT2Model, LlamaConfig, LlamaModel

from kcache import _torch_adaptor as adaptor
from kcache.guards.portable_checks import expected, first_failure, resolve
from kcache.precompiled import call

HERE = pathlib.Path(__file__).resolve().parent
REPEAT = 50


def measure(blocks, args: tuple, kwargs: dict) -> dict:
    checks: list = []
    adaptor.aot_compile_call(call, (blocks[0], *args), kwargs, None, None, None, checks=checks,
                             resolve=resolve, expected=expected)
    stored = json.loads(json.dumps(checks))  # as a warm process reads them from the bundle
    f_locals = {"block": blocks[1], "args": args, "kwargs": kwargs}
    start = time.perf_counter()
    for _ in range(REPEAT):
        assert first_failure(stored, f_locals) is None
    first = (time.perf_counter() - start) / REPEAT
    memo: dict = {}
    first_failure(stored, f_locals, memo)
    start = time.perf_counter()
    for _ in range(REPEAT):
        assert first_failure(stored, f_locals, memo) is None
    further = (time.perf_counter() - start) / REPEAT
    return {"checks": len(checks), "bundle_bytes": len(json.dumps(checks)),
            "first_block_ms": round(1000 * first, 2), "further_block_ms": round(1000 * further, 2),
            "guard_types": sorted({c["guard"] for c in checks})}


def main() -> None:
    torch.manual_seed(0)
    gpt2 = GPT2Model(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128)).h
    llama = LlamaModel(LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=128))
    x = torch.randn(1, 8, 64)
    pos = llama.rotary_emb(x, torch.arange(8)[None])
    out = {"torch": torch.__version__, "repeat": REPEAT,
           "gpt2": measure(gpt2, (x,), {}),
           "llama": measure(llama.layers, (x,), {"position_embeddings": pos})}
    (HERE / "check_cost.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
