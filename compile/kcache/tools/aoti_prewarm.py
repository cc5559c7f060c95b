"""Prewarm a model's AOTInductor regions and write the plan a C++ job runs.

    python -m kcache.aoti_prewarm --model gpt2 --layers 4 --hidden 64 --out plan/

For each distinct region of the model (embed, one decoder block, head) the
program is exported, keyed, and fetched from kcache or compiled with
AOTInductor and uploaded (single flight, like any region). The output
folder gets:

- plan.json: the stage sequence (each stage's region key, input/output
  tensor names and which model tensor binds to each package constant) and,
  per region, every key field in full, so that a C++ process recomputes each
  key with the same code (keys/) instead of re-tracing a graph;
- weights.pt: every parameter and buffer of the model (torch.save of a
  plain dict; libtorch reads it with torch::pickle_load).

The server (KCACHE_URL) or node tier (KCACHE_LOCAL_DIR) comes from the
usual KCACHE_* settings (docs/client.md).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import torch

from kcache import settings
from kcache.api import report
from kcache.state import store
from kcache.artifacts import isa_probes
from kcache.aoti.region import ExportedRegion, compile_bundle, export
from kcache.aoti.stages import stages_for, tensor_names, model_tensors

PLAN_FORMAT = "kcache-aoti-plan-v1"


def prewarm(model: torch.nn.Module, out_dir: str | pathlib.Path, *, command: str = "",
            max_batch: int = 16, max_seq: int | None = None) -> dict:
    """Exports, fetches or compiles every region; writes plan.json and weights.pt."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    client = store.get_store()
    # Inductor's ISA probes as the Python paths get them: shared through the
    # cache on a fresh node, answered from the node's record after
    # (kcache/artifacts/isa_probes.py); before anything asks Inductor for its ISA.
    isa_probes.ensure(client)
    names = tensor_names(model)
    regions: dict[str, ExportedRegion] = {}
    plan_stages, report = [], []
    for stage in stages_for(model, max_batch=max_batch, max_seq=max_seq):
        region = export(stage)
        constants = {fqn: names[id(t)] for fqn, t in
                     list(stage.module.named_parameters(remove_duplicate=False)) +
                     list(stage.module.named_buffers(remove_duplicate=False))}
        plan_stages.append({"name": stage.name, "key": region.key, "inputs": stage.inputs,
                            "outputs": stage.outputs, "constants": constants})
        if region.key in regions:
            continue
        regions[region.key] = region
        start = time.perf_counter()
        _data, source = client.get_or_compile(region.key, lambda r=region: compile_bundle(r),
                                              region.explanation)
        report.append({"key": region.key, "label": region.label, "source": source,
                       "seconds": round(time.perf_counter() - start, 3)})
    torch.save(model_tensors(model), out / "weights.pt")
    plan = {
        "format": PLAN_FORMAT,
        "model": type(model).__name__,
        "weights": "weights.pt",
        "inputs": ["input_ids"],
        "outputs": ["logits"],
        "prewarm_command": command,
        "regions": {k: {"label": r.label, "fields": r.fields} for k, r in regions.items()},
        "stages": plan_stages,
    }
    (out / "plan.json").write_text(json.dumps(plan, indent=1, sort_keys=True))
    return {"regions": report, "stages": len(plan_stages), "plan": str(out / "plan.json")}


def seeded_model(kind: str, layers: int, hidden: int, heads: int, seed: int) -> torch.nn.Module:
    """model_zoo.build_model's configuration (vocabulary 256), weights from `seed`, eval mode."""
    from kcache.tools.model_zoo import build_model

    torch.manual_seed(seed)
    return build_model(kind, layers, hidden, heads).eval()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kcache.aoti_prewarm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--out", required=True, help="folder for plan.json and weights.pt")
    a = p.parse_args(argv)
    if store.current() is None and settings.get("KCACHE_URL"):
        store.configure(local_dir="none")  # as kcache.prewarm: the server or a compile, never this node
    model = seeded_model(a.model, a.layers, a.hidden, a.heads, a.seed)
    command = "python -m kcache.aoti_prewarm " + " ".join(argv if argv is not None else sys.argv[1:])
    result = prewarm(model, a.out, command=command, max_batch=a.max_batch)
    for r in result["regions"]:
        print(f"{r['source']:9} {r['seconds']:7.2f}s {r['key'][:16]} {r['label']}")
    client = report.stats().get("client", {})
    print(json.dumps({"stages": result["stages"], "regions": len(result["regions"]),
                      "plan": result["plan"], "kcache": client}))
    has_server = bool(store.get_store().config.get("url"))
    not_stored = [r for r in result["regions"] if has_server and r["source"] not in ("compiled", "server")]
    if not_stored or client.get("upload_failures", 0):
        print(f"kcache.aoti_prewarm: {len(not_stored)} region(s) not on the server "
              f"({client.get('upload_failures', 0)} failed uploads); is it reachable and writable?",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
