"""DeepSpeed ZeRO (stage 2 or 3) through Accelerate, with regional compilation through kcache.

    accelerate launch --num-processes 2 --use-deepspeed --zero-stage 2 examples/accelerate_deepspeed.py --out /tmp/ds
    torchrun --standalone --nproc-per-node 2 examples/accelerate_deepspeed.py --zero-stage 3 --out /tmp/ds

Accelerate hands the model to deepspeed.initialize() and then compiles the
engine's module in place (compile_regions_deepspeed, which
kcache.accelerate.install() routes through kcache.compile_regions_in_place).
On a machine without GPUs DeepSpeed picks its CPU accelerator (gloo), and
the Accelerator is told the backend: Accelerate 1.15 (not 1.11) finds no
process group backend on a CPU-only machine unless cpu=True, which it
refuses with DeepSpeed, and would run every rank alone (DistributedType
DEEPSPEED with one process). The job itself is examples/accelerate_job.py;
what runs where is in docs/distributed.md.
"""

from __future__ import annotations

import sys

from accelerate_job import cpu_only, parse, train


def main() -> None:
    stage = 2
    if "--zero-stage" in sys.argv:  # this script's own option, before the shared ones
        i = sys.argv.index("--zero-stage")
        stage = int(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    args = parse(__doc__.splitlines()[0])

    def make():
        from accelerate import Accelerator
        from accelerate.utils import DeepSpeedPlugin, InitProcessGroupKwargs, TorchDynamoPlugin

        plugin = DeepSpeedPlugin(zero_stage=stage, gradient_accumulation_steps=1,
                                 gradient_clipping=None, zero3_init_flag=False)
        plugin.deepspeed_config["zero_force_ds_cpu_optimizer"] = False  # torch's AdamW, as elsewhere
        plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = args.batch
        return Accelerator(
            mixed_precision=args.mixed_precision, deepspeed_plugin=plugin,
            kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")] if cpu_only() else [],
            dynamo_plugin=TorchDynamoPlugin(backend="inductor", use_regional_compilation=True))

    train(args, make, f"deepspeed-zero{stage}")


if __name__ == "__main__":
    main()
