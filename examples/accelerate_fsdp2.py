"""FSDP2 (fully_shard) through Accelerate, with regional compilation through kcache.

    accelerate launch --num-processes 2 examples/accelerate_fsdp2.py --out /tmp/fsdp2
    torchrun --standalone --nproc-per-node 2 examples/accelerate_fsdp2.py --out /tmp/fsdp2

Accelerate's FSDP2 path compiles the regions first (compile_regions in
1.11, compile_regions_fsdp2 from 1.12 on; kcache.accelerate.install()
routes both through kcache) and then shards every transformer block with
fully_shard. The job itself is examples/accelerate_job.py.

On CPU, Accelerate (1.11 to 1.15) never selects FSDP: it decides the
distributed type from the device, and a CPU job is MULTI_CPU (plain DDP;
with cpu=True from 1.15 on) whatever fsdp_plugin says. fully_shard itself runs on CPU with gloo, so on
a CPU-only machine this script switches the Accelerator's state to FSDP
before prepare() (cpu_fsdp_shim below; docs/distributed.md). On a GPU the
shim does nothing.
"""

from __future__ import annotations

from accelerate_job import cpu_only, parse, train


def cpu_fsdp_shim(accelerator, plugin) -> None:
    """Lets Accelerate take its FSDP2 path on a CPU-only machine (see above)."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type == DistributedType.MULTI_CPU:
        accelerator.state.distributed_type = DistributedType.FSDP
        accelerator.state.fsdp_plugin = plugin


def make_accelerator(args, compile_regions: bool = True):
    """Accelerate's FSDP2 setup; without `compile_regions` no
    TorchDynamoPlugin (bench/coldstart/fsdp2_eager.py: the eager baseline)."""
    from accelerate import Accelerator
    from accelerate.utils import FullyShardedDataParallelPlugin, TorchDynamoPlugin

    block = "GPT2Block" if args.model == "gpt2" else "LlamaDecoderLayer"
    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2, auto_wrap_policy="transformer_based_wrap",
        transformer_cls_names_to_wrap=[block], reshard_after_forward=True)
    dynamo = {"dynamo_plugin": TorchDynamoPlugin(backend="inductor", use_regional_compilation=True)}
    accelerator = Accelerator(cpu=cpu_only(), mixed_precision=args.mixed_precision, fsdp_plugin=plugin,
                              **(dynamo if compile_regions else {}))
    cpu_fsdp_shim(accelerator, plugin)
    assert accelerator.is_fsdp2, accelerator.distributed_type
    return accelerator


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    train(args, lambda: make_accelerator(args), "fsdp2")


if __name__ == "__main__":
    main()
