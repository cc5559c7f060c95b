"""One phase of the GPU check (bench/gpu_check.sh), or the report over phases.

    python bench/gpu/check.py job --phase cold [--cpu] [--eager] > cold.json
    python bench/gpu/check.py report cold.json warm.json

A job trains a GPT-2 configuration (kcache.tools.prewarm.build_model) with
kcache.compile_regions against the server in KCACHE_URL, in a process whose
node tier, Inductor cache and Triton cache are fresh (the script sets them),
and prints one JSON object: time to the first compiled step (compile
included), median step times compiled and (with --eager) eager, PyTorch's
counters, Triton kernels compiled here vs written from bundles, kcache's
counters, the target as Python and the C++ client see it, and the cubin
archs the region bundles record.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import statistics
import sys
import time


def bundles(node_dir: pathlib.Path) -> dict[str, dict]:
    """key -> manifest of each region bundle in this process's node tier."""
    from kcache import _core

    out = {}
    for p in (node_dir / "objects").rglob("*"):
        if p.is_file():
            manifest = json.loads(_core.inspect_bundle(p.read_bytes())[0])
            if not manifest.get("label", "").startswith("inductor-isa-probes/"):
                out[p.name] = manifest
    return out


def triton_kernels(cache_dir: str | None) -> set[str]:
    """Kernel hashes with a cubin in the Triton cache dir (TRITON_CACHE_DIR/<hash>/)."""
    if not cache_dir or not pathlib.Path(cache_dir).is_dir():
        return set()
    return {p.parent.name for p in pathlib.Path(cache_dir).glob("*/*.cubin")}


def targets(device_type: str) -> dict:
    from kcache import _core
    from kcache.keys import fields as keyfields

    out = {"python": keyfields.short_target(device_type)}
    try:
        out["cpp"] = _core.cuda_target()
    except _core.KcacheError as e:
        out["cpp"] = f"({e})"
    out["agree"] = out["python"] == out["cpp"]
    return out


def job(args: argparse.Namespace) -> dict:
    import torch

    import kcache
    from kcache import _torch_adaptor as adaptor
    from kcache import api
    from kcache.tools.prewarm import build_model

    device = "cpu" if args.cpu else "cuda"

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    torch.manual_seed(0)
    model = build_model("gpt2", args.layers, args.hidden, args.heads, args.dtype).to(device)
    ids = torch.randint(0, 256, (args.batch, args.seq),
                        generator=torch.Generator().manual_seed(1)).to(device)

    def steps(m, opt, n: int) -> tuple[list[float], list[float]]:
        times, losses = [], []
        for _ in range(n):
            sync()
            t = time.perf_counter()
            loss = m(ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sync()
            times.append(time.perf_counter() - t)
            losses.append(loss.item())
        return times, losses

    out: dict = {"phase": args.phase, "device": device, "torch": torch.__version__,
                 "kcache_module": kcache.__file__,
                 "allow_untested_torch": os.environ.get("KCACHE_ALLOW_UNTESTED_TORCH") == "1",
                 "config": {k: getattr(args, k) for k in
                            ("layers", "hidden", "heads", "batch", "seq", "dtype", "steps")}}
    if device == "cuda":
        out["gpu"] = torch.cuda.get_device_name(0)
        try:
            import triton

            out["triton"] = triton.__version__
        except ImportError:
            out["triton"] = None
    if args.eager:
        eager = copy.deepcopy(model)
        opt = torch.optim.AdamW(eager.parameters(), lr=1e-4)
        steps(eager, opt, 2)  # warm-up: allocator, cuBLAS handles
        out["eager_step_s"] = statistics.median(steps(eager, opt, args.steps)[0])
        del eager, opt

    start = time.perf_counter()
    compiled = kcache.compile_regions(model)
    opt = torch.optim.AdamW(compiled.parameters(), lr=1e-4)
    first_times, first_losses = steps(compiled, opt, 1)
    out["first_step_s"] = round(time.perf_counter() - start, 3)
    times, losses = steps(compiled, opt, args.steps)
    out["step_s"] = statistics.median(times)
    out["losses"] = first_losses + losses

    counters = adaptor.counters()
    out["inductor"] = {k: v for k, v in counters.get("inductor", {}).items()
                       if k.startswith(("fxgraph_cache", "triton_bundler", "async_compile"))}
    out["aot_autograd"] = counters.get("aot_autograd", {})
    out["kcache"] = kcache.stats()
    out["regions"] = api.region_outcomes()
    found = bundles(pathlib.Path(os.environ["KCACHE_LOCAL_DIR"]))
    restored = {r["key"] for r in out["regions"] if r["status"] in ("node", "server")}
    from_bundles = {c["name"].split(":triton/", 1)[1].split("/")[0]
                    for key, m in found.items() if key in restored
                    for c in m.get("cubins", []) if ":triton/" in c["name"]}
    kernels = triton_kernels(os.environ.get("TRITON_CACHE_DIR"))
    out["triton_kernels"] = {"in_cache_dir": len(kernels),
                             "from_bundles": len(kernels & from_bundles),
                             "compiled_here": len(kernels - from_bundles)}
    archs: dict[str, int] = {}
    for m in found.values():
        for c in m.get("cubins", []):
            archs[c["arch"]] = archs.get(c["arch"], 0) + 1
    out["bundles"] = {"count": len(found), "cubin_archs": archs,
                      "targets": sorted({m["label"].split("/")[1] for m in found.values()})}
    out["target"] = targets(device)
    return out


def report(paths: list[str]) -> str:
    runs = [json.loads(pathlib.Path(p).read_text()) for p in paths]
    eager = next((r["eager_step_s"] for r in runs if "eager_step_s" in r), None)
    lines = [f"device: {runs[0].get('gpu', 'cpu')}  torch {runs[0]['torch']}  "
             f"triton {runs[0].get('triton')}  config {json.dumps(runs[0]['config'])}",
             f"override KCACHE_ALLOW_UNTESTED_TORCH=1: {runs[0]['allow_untested_torch']}",
             f"eager step: {eager * 1e3:.1f} ms" if eager else "eager step: not measured",
             "phase  first_step_s  step_ms  vs_eager  fx_hit  fx_miss  triton_compiled  "
             "triton_from_bundle  kcache(hits/compiles)  client_refused"]
    for r in runs:
        ind, k = r["inductor"], r["kcache"]
        speed = f"{eager / r['step_s']:.2f}x" if eager else "-"
        lines.append(
            f"{r['phase']:<6} {r['first_step_s']:>12.2f}  {r['step_s'] * 1e3:>7.1f}  {speed:>8}  "
            f"{ind.get('fxgraph_cache_hit', 0):>6}  {ind.get('fxgraph_cache_miss', 0):>7}  "
            f"{r['triton_kernels']['compiled_here']:>15}  {r['triton_kernels']['from_bundles']:>18}  "
            f"{k['hits_node'] + k['hits_server']:>10}/{k['compiles']:<10}  "
            f"{k.get('client', {}).get('refused', 0):>14}")
    for r in runs:
        lines.append(f"{r['phase']}: bundles {r['bundles']['count']}, targets "
                     f"{r['bundles']['targets']}, cubin archs {r['bundles']['cubin_archs']}; "
                     f"target python={r['target']['python']} cpp={r['target']['cpp']}")
    if len(runs) >= 2:
        lines.append(f"losses identical cold vs warm: {runs[0]['losses'] == runs[1]['losses']}")
    failures = failed_checks(runs)
    lines += [f"FAIL: {f}" for f in failures] or ["checks: passed"]
    return "\n".join(lines), failures


def failed_checks(runs: list[dict]) -> list[str]:
    """What makes the check fail rather than report."""
    out = []
    for r in runs:
        if not r["bundles"]["count"]:
            out.append(f"{r['phase']}: no region bundles in the node tier")
        elif r["device"] == "cuda" and not r["bundles"]["cubin_archs"]:
            # Real Triton kernels were compiled or restored, so the listing
            # (_torch_adaptor.triton_cubins) found nothing it should have:
            # e.g. this torch keeps the Triton bundle under another attribute.
            out.append(f"{r['phase']}: {r['bundles']['count']} CUDA region bundles list no cubins; "
                       "the cubin listing is broken on this torch")
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("job")
    j.add_argument("--phase", required=True)
    j.add_argument("--cpu", action="store_true")
    j.add_argument("--eager", action="store_true", help="also time eager steps")
    j.add_argument("--layers", type=int, default=12)
    j.add_argument("--hidden", type=int, default=768)
    j.add_argument("--heads", type=int, default=12)
    j.add_argument("--batch", type=int, default=8)
    j.add_argument("--seq", type=int, default=256)
    j.add_argument("--dtype", default="bfloat16")
    j.add_argument("--steps", type=int, default=10)
    r = sub.add_parser("report")
    r.add_argument("runs", nargs="+")
    args = p.parse_args()
    if args.cmd == "job":
        print(json.dumps(job(args)))
        sys.stdout.flush()
        return
    text, failures = report(args.runs)
    print(text)
    sys.stdout.flush()
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
