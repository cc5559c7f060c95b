"""DDP through Accelerate, with regional compilation through kcache.

    accelerate launch --num-processes 2 examples/accelerate_ddp.py --out /tmp/ddp
    torchrun --standalone --nproc-per-node 2 examples/accelerate_ddp.py --out /tmp/ddp

On CPU Accelerate runs MULTI_CPU (DistributedDataParallel over gloo); on
GPUs MULTI_GPU (NCCL). Regions are compiled before DDP wraps the model. The
job itself is examples/accelerate_job.py.
"""

from __future__ import annotations

from accelerate_job import cpu_only, parse, train


def main() -> None:
    args = parse(__doc__.splitlines()[0])

    def make():
        from accelerate import Accelerator
        from accelerate.utils import TorchDynamoPlugin

        return Accelerator(
            cpu=cpu_only(), mixed_precision=args.mixed_precision,
            dynamo_plugin=TorchDynamoPlugin(backend="inductor", use_regional_compilation=True))

    train(args, make, "ddp")


if __name__ == "__main__":
    main()
