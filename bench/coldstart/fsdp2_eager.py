"""examples/accelerate_fsdp2.py with nothing compiled: the eager baseline of
`bench/coldstart/run.py --job fsdp2 --setups eager` (the same Accelerator,
FSDP2 plugin and CPU shim, no TorchDynamoPlugin, no kcache). Takes the
example's arguments."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from accelerate_fsdp2 import make_accelerator  # noqa: E402
from accelerate_job import parse, train  # noqa: E402


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    args.no_kcache = True  # nothing installed: Accelerate's FSDP2 alone
    train(args, lambda: make_accelerator(args, compile_regions=False), "fsdp2-eager")


if __name__ == "__main__":
    main()
