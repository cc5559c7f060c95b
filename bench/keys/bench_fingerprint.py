"""Cost of region detection and region keys vs the cost of compiling one block.

For 12-block GPT-2 and Llama configurations: find_regions over the model,
fingerprint + key of one block's Dynamo graph (given the graph), Dynamo's
trace of the block, and the reference: one cold Inductor compile of that
block (fresh cache dir). Prints a Markdown table with ratios.

    .venv/bin/python bench/keys/bench_fingerprint.py > bench/keys/REPORT.md
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench-ind-"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))

import torch  # noqa: E402

from kcache.keys.fields import CompileSettings  # noqa: E402
from kcache.api.regions import find_regions  # noqa: E402
from kcache.keys.graph_key import region_key  # noqa: E402
from models import zoo  # noqa: E402


def timed(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def block_graph(model, path):
    block = model.get_submodule(path)
    call = {}
    h = block.register_forward_pre_hook(lambda m, a, k: call.setdefault("c", (a, k)), with_kwargs=True)
    with torch.no_grad():
        model(zoo.ids(1, 32))
    h.remove()
    args, kwargs = call["c"]
    graphs = []

    def backend(gm, ex):
        graphs.append((gm, ex))
        return gm.forward

    def trace():
        graphs.clear()
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(block, backend=backend)(*args, **kwargs)

    trace_s = timed(trace, 3)
    return block, args, kwargs, graphs[0], trace_s


def main():
    rows = []
    for name, make, path in (("GPT-2", lambda: zoo.gpt2(layers=12, hidden=128, heads=4), "transformer.h.0"),
                             ("Llama", lambda: zoo.llama(layers=12, hidden=128, heads=4), "model.layers.0")):
        model = make()
        detect_s = timed(lambda: find_regions(model))
        block, args, kwargs, (gm, ex), trace_s = block_graph(model, path)
        with torch.no_grad():
            key_s = timed(lambda: region_key(gm, ex, "block", CompileSettings()))
        torch._dynamo.reset()
        t0 = time.perf_counter()
        with torch.no_grad():
            torch.compile(block)(*args, **kwargs)
        compile_s = time.perf_counter() - t0
        rows.append((name, detect_s, trace_s, key_s, compile_s))
    print("# Region detection and keys vs one block's compile\n")
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; 12 blocks, hidden 128, inference graphs.\n")
    print("| model | find_regions (12 blocks) | Dynamo trace of 1 block | fingerprint+key of 1 block | cold Inductor compile of 1 block (reference) | key cost / compile |")
    print("|---|---|---|---|---|---|")
    for name, d, t, k, c in rows:
        print(f"| {name} | {d*1e3:.2f} ms | {t*1e3:.0f} ms | {k*1e3:.2f} ms | {c:.1f} s | {k/c:.2%} |")
    print("\nCommand: `.venv/bin/python bench/keys/bench_fingerprint.py > bench/keys/REPORT.md`")


if __name__ == "__main__":
    main()
