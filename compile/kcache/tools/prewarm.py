"""Prewarm: compile a model's regions for this device and mode(s) and upload
them, so that a cluster's first job starts warm.

    python -m kcache.prewarm --model gpt2 --layers 12 --hidden 768 --heads 12 \\
        --mode default --mode max-autotune --dtype bfloat16 --device cuda --train \\
        --server http://kcache:8420

Builds a transformers model from a config (random weights, nothing
downloaded), compiles its regions with kcache.compile_regions and runs one
step — forward, and backward with --train — so that every region is keyed,
compiled (or found) and uploaded, then prints one line per region (key,
target, status) and a final JSON line. The server and everything else come
from the usual KCACHE_* settings (docs/client.md); --server overrides
KCACHE_URL. Keys name the device's arch (cuda:sm_XX) and the batch and
sequence shapes, so prewarm with the job's shapes, on the job's GPU type
(or with KCACHE_TARGET set), and with every rank's device seen as cuda:0.
Exit status 1 when anything could not be uploaded.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from kcache import settings

# The models prewarm builds live in model_zoo (aoti_prewarm builds them too,
# without importing this module); re-exported here for scripts that use them.
from kcache.tools.model_zoo import DTYPES, VOCAB, build_model  # noqa: E402,F401


def run_step(model: torch.nn.Module, ids: torch.Tensor, train: bool) -> float:
    """One forward (and backward when training): every region compiles here."""
    if train:
        model.train()
        loss = model(ids, labels=ids).loss
        loss.backward()
        return loss.item()
    model.eval()
    with torch.no_grad():
        return model(ids, labels=ids).loss.item()


def prewarm(model: torch.nn.Module, *, modes: list[str], phases: list[str], device: str,
            batch: int, seq: int) -> list[dict]:
    """Compiles (or fetches) every region of `model` for each mode and phase;
    returns kcache's per-region outcomes."""
    from kcache import api

    ids = torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(0)).to(device)
    model = model.to(device)
    for mode in modes:
        for phase in phases:
            torch.compiler.reset()  # a fresh trace, so each mode's regions reach kcache
            compiled = api.compile_regions(model, **({} if mode == "default" else {"mode": mode}))
            start = time.perf_counter()
            run_step(compiled, ids, phase == "train")
            print(f"kcache.prewarm: mode={mode} phase={phase} step {time.perf_counter() - start:.1f} s",
                  file=sys.stderr)
            model.zero_grad(set_to_none=True)
    return api.region_outcomes()


def api_config() -> dict:
    from kcache.state import store

    return store.get_store().config


def _check_device(device: str) -> str:
    dev = torch.device(device)
    if dev.type == "cuda" and (dev.index or 0) != 0:
        raise SystemExit(f"kcache.prewarm: {device}: kcache caches regions on cuda:0 only; "
                         "select the GPU with CUDA_VISIBLE_DEVICES (docs/operations.md)")
    return "cuda:0" if dev.type == "cuda" else dev.type


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kcache.prewarm", description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--mode", action="append", dest="modes",
                   help="torch.compile mode, repeatable (default: default)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--train", action="store_true", help="forward + backward (the default)")
    p.add_argument("--infer", action="store_true", help="forward under no_grad")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--server", help="kcache-server URL (default: KCACHE_URL)")
    p.add_argument("--aoti", metavar="DIR",
                   help="instead: compile AOTInductor packages for C++ jobs and write their "
                        "plan to DIR (docs/aoti.md; same as python -m kcache.aoti_prewarm)")
    return p.parse_args(argv)


def _prewarm_aoti(args: argparse.Namespace) -> int:
    from kcache.tools import aoti_prewarm

    argv = ["--model", args.model, "--layers", str(args.layers), "--hidden", str(args.hidden),
            "--heads", str(args.heads), "--out", args.aoti]
    return aoti_prewarm.main(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from kcache import api, background
    from kcache.keys import fields as keyfields

    background.force("wait")  # prewarm compiles and stores here, then exits (docs/cold-start.md)

    device = _check_device(args.device)
    url = args.server or settings.get("KCACHE_URL")
    if url:
        # With a server, this host's node tier is not asked: a region found
        # there would never reach the server, and prewarm would report a
        # cluster warm that is not. Every region comes from the server or is
        # compiled here and uploaded.
        api.configure(url=url, local_dir="none")
    if args.aoti:
        return _prewarm_aoti(args)
    phases = [p for p, on in (("train", args.train), ("infer", args.infer)) if on] or ["train"]
    torch.manual_seed(0)
    model = build_model(args.model, args.layers, args.hidden, args.heads, args.dtype)
    outcomes = prewarm(model, modes=args.modes or ["default"], phases=phases, device=device,
                       batch=args.batch, seq=args.seq)
    target = keyfields.short_target(torch.device(device).type)
    for o in outcomes:
        print(f"{o['key'][:16]}  {target:<14} {o['status']:<9} {o['label']}")
    stats = api.stats()
    client = stats.get("client", {})
    failed = client.get("upload_failures", 0) + client.get("server_errors", 0)
    has_server = bool(api_config().get("url"))
    not_uploaded = [o for o in outcomes
                    if o["status"] == "error" or (has_server and o["status"] == "local")]
    from kcache import _torch_adaptor as adaptor

    print(json.dumps({"target": target, "regions": outcomes, "kcache": stats,
                      "inductor": adaptor.counters().get("inductor", {})}))
    if failed or not_uploaded:
        print(f"kcache.prewarm: {len(not_uploaded)} region(s) compiled but not uploaded, "
              f"{failed} server error(s); is the server reachable and writable?", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
