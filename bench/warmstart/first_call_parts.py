"""kcache's own parts of a precompiled warm start's first calls, timed
inside one warm job (examples/train_regional.py, GPT-2, training): the
call-watch collection (kcache.guards.call_watch.collect), the portable
checks (kcache.precompiled.checks.checked), the region index's keys
(variants.index_for, the config fingerprint in it) and the variant keys.
Each part's time in the job itself, and then, replayed on the same
blocks after the job (gc off, minimum of REPLAYS rounds, steadier than
one job's timing), the collection of all blocks' watches and one config
fingerprint (memoized, and computed afresh), and the portable checks of
all blocks' first calls with a class memo per region (as before session
30) and one for the process (kcache/guards/class_memo.py). PyTorch's
kernel loader's build options are counted and timed in the job
(kcache/_torch_adaptor/precompiled.py same_build_options; its control,
`--without-options-memo`, builds them as PyTorch does).

    # after one cold run has filled $N (KCACHE_LOCAL_DIR):
    KCACHE_LOCAL_DIR=$N .venv/bin/python bench/warmstart/first_call_parts.py --layers 24 --out first_call_parts.json

With `--against REV`, the replay alternates the collection with REV's
call_watch.py (from git, loaded beside the installed one) on the same
blocks: the same process and blocks for both, which separate processes on
this VM are not (their timings drift by more than the difference).
"""

from __future__ import annotations

import argparse
import atexit
import collections
import gc
import json
import os
import platform
import runpy
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPLAYS = 15


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--model", default="gpt2")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--label", default="")
    p.add_argument("--against", help="a git revision whose call_watch.collect the replay alternates with")
    p.add_argument("--without-options-memo", action="store_true",
                   help="the control: loads build their kernels' options as PyTorch does (no same_build_options)")
    args = p.parse_args()
    command = " ".join(["python", "bench/warmstart/first_call_parts.py", *sys.argv[1:]])
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp())

    import kcache
    import kcache._torch_adaptor as adaptor
    import kcache.guards.call_watch as call_watch
    import kcache.precompiled.checks as checks
    import kcache.precompiled.variants as variants

    seconds: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    captured: list[tuple] = []

    def timed(mod, name: str, label: str, capture: bool = False) -> None:
        fn = getattr(mod, name)

        def wrapper(*a, **k):
            if capture:
                captured.append(a[:2])
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                seconds[label] += time.perf_counter() - start
                calls[label] += 1

        setattr(mod, name, wrapper)

    collect = call_watch.collect
    timed(call_watch, "collect", "collect", capture=True)
    checked_calls: list[tuple] = []  # (region name, checks, f_locals) of every portable check run
    real_checked = checks.checked

    def checked(region, state, variant, compiled, block, a, k):
        if compiled is not None:
            checked_calls.append((region.name, compiled[1], {"block": block, "args": a, "kwargs": k}))
        return real_checked(region, state, variant, compiled, block, a, k)

    checks.checked = checked
    timed(checks, "checked", "checks")
    # PyTorch's kernel loader's build options: how many are built in the job, and their time
    from torch._inductor import cpp_builder

    real_options_init = cpp_builder.CppTorchDeviceOptions.__init__

    def options_init(self, *a, **k):
        start = time.perf_counter()
        try:
            real_options_init(self, *a, **k)
        finally:
            seconds["build_options"] += time.perf_counter() - start
            calls["build_options"] += 1

    cpp_builder.CppTorchDeviceOptions.__init__ = options_init
    if args.without_options_memo:
        import contextlib

        import kcache._torch_adaptor.precompiled as precompiled

        precompiled.same_build_options = contextlib.nullcontext
    timed(variants, "index_for", "index_for")
    timed(variants, "variant_key", "variant_key")
    timed(adaptor, "config_fingerprint", "config_fingerprint")

    ways = {"installed": collect}
    if args.against:
        import importlib.util
        import subprocess

        source = subprocess.run(["git", "-C", str(REPO), "show", f"{args.against}:compile/kcache/guards/call_watch.py"],
                                capture_output=True, text=True, check=True).stdout
        path = Path(tempfile.mkdtemp()) / "call_watch_against.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("call_watch_against", path)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        ways[args.against] = old.collect

    def replay() -> None:
        gc.collect()
        gc.disable()
        rounds: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(REPLAYS):
            for way, fn in ways.items():
                start = time.perf_counter()
                for checks_, block in captured:
                    fn(checks_, block)
                rounds[way].append(time.perf_counter() - start)
        # the portable checks of every block's first call: a class memo per
        # region (before 2026-12-06's session 30) against one for the process
        from kcache.guards import portable_checks
        from kcache.guards.class_memo import ClassMemo

        memo_rounds: dict[str, list[float]] = {"memo per region": [], "memo per process": []}
        for _ in range(REPLAYS):
            for way in memo_rounds:
                memos: dict = collections.defaultdict(ClassMemo)
                start = time.perf_counter()
                for name, checks_, f_locals in checked_calls:
                    portable_checks.first_failure(checks_, f_locals, memos[name if way == "memo per region" else ""])
                memo_rounds[way].append(time.perf_counter() - start)
        from kcache._torch_adaptor import config_key

        fp = []
        for _ in range(REPLAYS):
            start = time.perf_counter()
            config_key.config_fingerprint()
            fp.append(time.perf_counter() - start)
        fresh = []
        if hasattr(config_key, "_fingerprint"):  # the memo's commit and later
            import torch

            configs = (torch._inductor.config, torch._functorch.config, torch._dynamo.config)
            for _ in range(REPLAYS):
                start = time.perf_counter()
                config_key._fingerprint(configs)
                fresh.append(time.perf_counter() - start)
        gc.enable()
        stats = kcache.stats()
        result = {
            "command": command,
            "label": args.label, "kcache_file": kcache.__file__, "machine": platform.processor() or platform.machine(),
            "model": args.model, "layers": args.layers,
            "in_the_job_s": {k: round(v, 4) for k, v in seconds.items()}, "calls": dict(calls),
            "options_memo": not args.without_options_memo,
            "precompiled_blocks": stats.get("precompiled_blocks"),
            "first_call_seconds": round(stats.get("precompiled_first_call_seconds", 0.0), 4),
            "replay_collect_all_blocks_min_s": {way: round(min(r), 5) for way, r in rounds.items()},
            "replay_portable_checks_all_blocks_min_s": {w: round(min(r), 5) for w, r in memo_rounds.items()},
            "replay_config_fingerprint_min_s": round(min(fp), 6),
            "replay_config_fingerprint_fresh_min_s": round(min(fresh), 6) if fresh else None,
            "replays": REPLAYS,
        }
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result), file=sys.stderr)

    atexit.register(replay)
    sys.argv = ["train_regional.py", "--model", args.model, "--layers", str(args.layers), "--steps", "2"]
    runpy.run_path(str(REPO / "examples" / "train_regional.py"), run_name="__main__")


if __name__ == "__main__":
    main()
