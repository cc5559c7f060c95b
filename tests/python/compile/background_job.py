"""A training job for the cold start without waiting (kcache.background):
a transformers model from a config, its blocks through
kcache.compile_regions, and beside it an eager copy with the same weights
and data, stepped together. Prints one JSON line: both runs' losses per
step, which steps ran every block compiled, kcache's stats and timeline,
and PyTorch's own Dynamo traces in this process.

    python background_job.py --model gpt2 --layers 2 --steps 4 [--until-switched]
    python background_job.py --main-blocks ...   # blocks of a class defined here (__main__)
    python background_job.py --submodule-hooks ...  # blocks on the traced path
    python background_job.py --eval-from 1 --until-switched ...  # train, then eval
    python background_job.py --freeze-when-compiled --until-switched ...  # a block frozen once compiled
    python background_job.py --pass-factor 1.5 --matmul-precision high --stock-twin ...
        # a job's compiler settings; its twin compiled by stock torch.compile under them

--until-switched keeps stepping (past --steps, up to --max-steps) until
every region this process handed to its compile worker has switched, or
is orphaned / on the wait path: it waits on kcache's own state, not on a
clock. --pause-file F: before each step after the first, waits while F exists (the test
holds the job between steps that way).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time

_REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(_REPO, "examples"))
sys.path.insert(0, os.path.join(_REPO, "tests"))  # models.blocks

import torch  # noqa: E402

from train_regional import DynamoTraces, build_model  # noqa: E402


class MainBlock(torch.nn.Module):
    """A block whose class lives in __main__: a compile worker cannot import it."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)) + x


class MainModel(torch.nn.Module):
    def __init__(self, layers: int, width: int) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(256, width)
        self.blocks = torch.nn.ModuleList([MainBlock(width) for _ in range(layers)])
        self.head = torch.nn.Linear(width, 256)

    def forward(self, ids, labels):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        loss = torch.nn.functional.cross_entropy(self.head(x).flatten(0, 1), labels.flatten())
        return type("Out", (), {"loss": loss})()


def _graph_break(module, args):
    torch._dynamo.graph_break()


def hook_submodules(model: torch.nn.Module) -> None:
    """A forward pre-hook that breaks Dynamo's graph on the last Linear-like
    submodule of each repeated block (what DeepSpeed ZeRO 3's hooks do, on
    every submodule)."""
    for blocks in (m for m in model.modules() if isinstance(m, torch.nn.ModuleList)):
        for block in blocks:
            subs = [m for m in block.modules() if m is not block and hasattr(m, "weight")]
            subs[-1].register_forward_pre_hook(_graph_break)


def _noop_hook(module, args):
    return None


def unpicklable_embedding(model: torch.nn.Module) -> None:
    """What DeepSpeed ZeRO 3 does to each module, in small: hooks of its own
    and an attribute holding a class defined in a function."""
    class PreBackward:  # local: neither it nor its instances pickle
        pass

    emb = next(m for m in model.modules() if isinstance(m, torch.nn.Embedding))
    emb.register_forward_pre_hook(_noop_hook)
    emb.pre_bwd_fn = PreBackward


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["gpt2", "llama", "two-kinds"], default="gpt2")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=100000)
    p.add_argument("--until-switched", action="store_true")
    p.add_argument("--main-blocks", action="store_true")
    p.add_argument("--in-place", action="store_true", help="kcache.compile_regions_in_place")
    p.add_argument("--pause-file")
    p.add_argument("--unpicklable-embedding", action="store_true",
                   help="the Embedding gets a hook of its own and an attribute holding a local class "
                        "(as DeepSpeed ZeRO 3 leaves on every module): it cannot go to the worker")
    p.add_argument("--submodule-hooks", action="store_true",
                   help="a graph-breaking forward pre-hook on a submodule of each block (as "
                        "DeepSpeed ZeRO 3's): the blocks take the traced path")
    p.add_argument("--freeze-when-compiled", action="store_true",
                   help="after the first step that ran every block compiled, the first block's parameters "
                        "stop requiring grad (both copies); the job runs on at least until then")
    p.add_argument("--eval-from", type=int,
                   help="from this step on, the model in eval mode under no_grad (no optimizer step)")
    p.add_argument("--pass-factor", type=float,
                   help="sets Inductor's post_grad_custom_post_pass to models.passes.ScaleFirstOutput(F)")
    p.add_argument("--matmul-precision", help="torch.set_float32_matmul_precision(P) before compiling")
    p.add_argument("--stock-twin", action="store_true",
                   help="the twin is compiled by Accelerate's compile_regions with stock torch.compile "
                        "(under the same settings) instead of running eagerly")
    args = p.parse_args()

    if args.pass_factor is not None:
        from models.passes import ScaleFirstOutput

        torch._inductor.config.post_grad_custom_post_pass = ScaleFirstOutput(args.pass_factor)
    if args.matmul_precision:
        torch.set_float32_matmul_precision(args.matmul_precision)

    import kcache
    from kcache import _torch_adaptor as adaptor
    from kcache import background

    traces = DynamoTraces()
    torch.manual_seed(0)
    if args.main_blocks:
        model = MainModel(args.layers, args.hidden)
    elif args.model == "two-kinds":
        from models.blocks import TwoKinds

        model = TwoKinds(args.layers, args.hidden)
    else:
        model = build_model(args.model, args.layers, args.hidden)
    eager = copy.deepcopy(model)
    if args.submodule_hooks:
        hook_submodules(model)
    if args.unpicklable_embedding:
        unpicklable_embedding(model)
    if args.stock_twin:  # Accelerate's own regional compilation, stock torch.compile
        from accelerate.utils import compile_regions

        eager = compile_regions(eager)
    if args.in_place:
        kcache.compile_regions_in_place(model)
    else:
        model = kcache.compile_regions(model)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, eager)]
    ids = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))

    def settled() -> bool:
        return not background.compiling()

    losses, eager_losses, compiled_steps, eager_steps = [], [], [], []
    step = 0
    t0 = time.perf_counter()
    frozen = False
    while step < args.max_steps and (step < args.steps or (args.until_switched and not settled())
                                     or (args.freeze_when_compiled and not frozen)):
        while step > 0 and args.pause_file and os.path.exists(args.pause_file):
            time.sleep(0.05)
        bg = background.current()
        print(f"background_job: step {step} at {time.perf_counter() - t0:.2f} s, worker pid "
              f"{bg.worker.proc.pid if bg and bg.worker else None}", file=sys.stderr, flush=True)
        before = kcache.stats()["eager_block_calls"]
        if args.freeze_when_compiled and not frozen and compiled_steps:
            for m in (model, eager):
                blocks = next(b for b in m.modules() if isinstance(b, torch.nn.ModuleList))
                blocks[0].requires_grad_(False)
            frozen = True
        evaluating = args.eval_from is not None and step >= args.eval_from
        for m, opt, out in ((model, opts[0], losses), (eager, opts[1], eager_losses)):
            if evaluating:  # eval mode, no grad: another region than training's
                m.eval()
                with torch.no_grad():
                    out.append(m(ids, labels=ids).loss.item())
                continue
            loss = m(ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            out.append(loss.item())
        if kcache.stats()["eager_block_calls"] == before:
            compiled_steps.append(step)
        if kcache.stats()["regions_switched"] == 0:
            eager_steps.append(step)  # no region had switched by its end: every block eager
        step += 1
    c = adaptor.counters()
    bg = background.current()
    print(json.dumps({
        "losses": losses,
        "eager_losses": eager_losses,
        "compiled_steps": compiled_steps,
        "eager_steps": eager_steps,
        "seconds": time.perf_counter() - t0,
        "kcache": kcache.stats(),
        "timeline": bg.timeline() if bg else None,
        "mode": "background" if bg else "wait",
        "dynamo_traced": traces.traced,
        "aot_autograd": c.get("aot_autograd", {}),
        "inductor": {k: v for k, v in c.get("inductor", {}).items() if "cache" in k},
        "pid": os.getpid(),
    }))


if __name__ == "__main__":
    main()
