"""The end of a fine-tuning job through kcache: train, save, unwrap, reload.

    python dropin_save_job.py trainer --kind gpt2 --out DIR   # Trainer, 2 steps, every save path
    python dropin_save_job.py resume --kind gpt2 --out DIR    # Trainer resumes DIR's checkpoint-1
    python dropin_save_job.py peft --kind gpt2 --out DIR      # a LoRA adapter through Accelerate

kcache goes in through kcache.accelerate.install() and Accelerate's regional
compilation (ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION, set by the test),
as a user who swaps the function changes nothing else. Every file a save
path writes is loaded into a model that was never compiled (transformers'
from_pretrained reporting its missing, unexpected and mismatched keys, or
load_state_dict(strict=True)), and its logits compared with the trained
model's. Prints one JSON line (tests/python/compile/test_dropin_save.py).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib

import torch

import kcache
import kcache.accelerate
from kcache import _torch_adaptor as adaptor
from kcache.tools.model_zoo import VOCAB, build_model

SEQ = 16


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int = 8) -> None:
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def fresh(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(kind, layers=2, hidden=64, heads=2)


def probe_ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(7))


def logits(model: torch.nn.Module) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(probe_ids()).logits


def load_saved(kind: str, path: pathlib.Path) -> tuple[torch.nn.Module, dict]:
    """The files at `path` in a model never compiled: through
    from_pretrained where the save wrote a config (it reports missing,
    unexpected and mismatched keys), else load_state_dict, where a key
    missing only because it shares its tensor with a saved one (GPT-2's
    tied lm_head, which safetensors saves once) is not missing."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    if (path / "config.json").exists():
        model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
        return model, {k: sorted(map(str, v)) for k, v in info.items() if k != "error_msgs"}
    model = fresh(kind)
    sd = {}
    for f in sorted(path.glob("*.safetensors")):
        sd.update(load_file(str(f)))
    r = model.load_state_dict(sd, strict=False)
    storage = {k: v.untyped_storage().data_ptr() for k, v in model.state_dict().items()}
    saved = {storage[k] for k in sd if k in storage}
    missing = [k for k in r.missing_keys if storage.get(k) not in saved]
    return model, {"missing_keys": missing, "unexpected_keys": list(r.unexpected_keys), "mismatched_keys": []}


def saved_keys(path: pathlib.Path) -> list[str]:
    from safetensors import safe_open

    keys = []
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(str(f), "pt") as s:
            keys += list(s.keys())
    return sorted(keys)


def compiled_report(model: torch.nn.Module) -> dict:
    from accelerate.utils import has_compiled_regions

    blocks = [type(m).__name__ for m in model.modules() if isinstance(m, adaptor.OptimizedModule)]
    return {"has_compiled_regions": has_compiled_regions(model), "compiled_blocks": blocks}


def trainer_for(kind: str, out: pathlib.Path, model: torch.nn.Module):
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(output_dir=str(out), max_steps=2, per_device_train_batch_size=2,
                             learning_rate=1e-3, save_strategy="steps", save_steps=1, logging_steps=1,
                             torch_compile=True, torch_compile_backend="inductor", report_to=[],
                             use_cpu=True, dataloader_num_workers=0, seed=0, data_seed=0)
    return Trainer(model=model, args=args, train_dataset=Tokens())


def run_trainer(kind: str, out: pathlib.Path) -> dict:
    trainer = trainer_for(kind, out, fresh(kind))
    trainer.train()
    report = {"compiled": compiled_report(trainer.model_wrapped)}
    acc = trainer.accelerator
    trained = acc.unwrap_model(trainer.model_wrapped, keep_torch_compile=False)
    report["unwrapped_is_compiled"] = compiled_report(trained)["has_compiled_regions"]
    want = logits(trained)

    # A never-compiled model of the same configuration, saved: the keys a
    # plain model writes.
    references = {"save_pretrained": out / "reference", "accelerator.save_model": out / "reference_acc"}
    fresh(kind).save_pretrained(references["save_pretrained"])
    acc.save_model(fresh(kind), str(references["accelerator.save_model"]))
    paths = {}
    trainer.save_model(str(out / "trainer_save"))
    paths["trainer.save_model"] = out / "trainer_save"
    acc.save_model(trainer.model_wrapped, str(out / "accelerator_save"))
    paths["accelerator.save_model"] = out / "accelerator_save"
    trained.save_pretrained(out / "unwrap_save_pretrained")
    paths["unwrap_model+save_pretrained"] = out / "unwrap_save_pretrained"
    paths["checkpoint-2"] = out / "checkpoint-2"
    saves = {}
    for name, path in paths.items():
        model, info = load_saved(kind, path)
        saves[name] = {"loading_info": info, "same_keys_as_plain": saved_keys(path) == saved_keys(
                       references.get(name, references["save_pretrained"])),
                       "max_logit_diff": float((logits(model) - want).abs().max())}
    # State dicts: accelerator.get_state_dict and torch.save of what
    # unwrap_model returns, loaded strictly into a plain model.
    plain_keys = sorted(fresh(kind).state_dict())
    sd = acc.get_state_dict(trainer.model_wrapped)
    saves["accelerator.get_state_dict"] = {"same_keys_as_plain": sorted(sd) == plain_keys}
    torch.save(trained.state_dict(), out / "state_dict.pt")
    plain = fresh(kind)
    result = plain.load_state_dict(torch.load(out / "state_dict.pt"), strict=True)
    saves["torch.save(unwrap_model().state_dict())"] = {
        "strict_load": {"missing": list(result.missing_keys), "unexpected": list(result.unexpected_keys)},
        "max_logit_diff": float((logits(plain) - want).abs().max())}
    report["saves"] = saves
    # save_state / load_state round trip on the compiled model: weights
    # zeroed in between come back.
    acc.save_state(str(out / "state"))
    with torch.no_grad():
        for p in trained.parameters():
            p.zero_()
    acc.load_state(str(out / "state"))
    report["load_state_logit_diff"] = float((logits(trained) - want).abs().max())
    # generate() on the compiled model after training, against the plain
    # reloaded model's (greedy: the same tokens).
    compiled = trainer.model_wrapped
    compiled.eval()
    with torch.no_grad():
        got = compiled.generate(probe_ids()[:1, :8], max_new_tokens=3, do_sample=False, pad_token_id=0)
        ref = plain.generate(probe_ids()[:1, :8], max_new_tokens=3, do_sample=False, pad_token_id=0)
    report["generate_equal"] = bool(torch.equal(got, ref))
    report["final_state"] = {k: float(v.double().sum()) for k, v in trained.state_dict().items()}
    return report


def run_resume(kind: str, out: pathlib.Path) -> dict:
    trainer = trainer_for(kind, out, fresh(kind))
    trainer.train(resume_from_checkpoint=str(out / "checkpoint-1"))
    trained = trainer.accelerator.unwrap_model(trainer.model_wrapped, keep_torch_compile=False)
    return {"compiled": compiled_report(trainer.model_wrapped),
            "final_state": {k: float(v.double().sum()) for k, v in trained.state_dict().items()}}


def run_peft(kind: str, out: pathlib.Path) -> dict:
    from accelerate import Accelerator
    from accelerate.utils import TorchDynamoPlugin
    from peft import LoraConfig, PeftModel, get_peft_model

    targets = {"gpt2": ["c_attn"], "llama": ["q_proj", "v_proj"]}[kind]

    def lora(model: torch.nn.Module) -> torch.nn.Module:
        torch.manual_seed(3)
        return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=targets,
                                                lora_dropout=0.0, init_lora_weights=False))

    # The adapter keys PEFT writes for the same model never compiled.
    lora(fresh(kind)).save_pretrained(out / "adapter_reference")
    acc = Accelerator(dynamo_plugin=TorchDynamoPlugin(backend="inductor", use_regional_compilation=True),
                      cpu=True)
    model = lora(fresh(kind))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    model, opt = acc.prepare(model, opt)
    report = {"compiled": compiled_report(model)}
    data = Tokens()
    for step in range(2):
        batch = data[2 * step]
        loss = model(input_ids=batch["input_ids"][None], labels=batch["labels"][None]).loss
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
    unwrapped = acc.unwrap_model(model, keep_torch_compile=False)
    want = logits(unwrapped)
    unwrapped.save_pretrained(out / "adapter")
    reloaded = PeftModel.from_pretrained(fresh(kind), out / "adapter")
    report["adapter_same_keys"] = saved_keys(out / "adapter") == saved_keys(out / "adapter_reference")
    report["adapter_keys"] = saved_keys(out / "adapter")[:4]
    report["max_logit_diff"] = float((logits(reloaded) - want).abs().max())
    return report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["trainer", "resume", "peft"])
    ap.add_argument("--kind", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--out", type=pathlib.Path, required=True)
    a = ap.parse_args()
    assert os.environ.get("ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION") == "1"
    kcache.accelerate.install()
    report = {"trainer": run_trainer, "resume": run_resume, "peft": run_peft}[a.what](a.kind, a.out)
    c = adaptor.counters()
    report["kcache"] = kcache.stats()
    report["dynamo_stats"] = c.get("stats", {})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
