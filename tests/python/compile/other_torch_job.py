"""examples/train_regional.py as on another torch: `--as-version V` makes
torch.__version__ read V before kcache is imported (a torch outside the
window, issue 29), `--without-traced-probe` also makes one of the traced
path's probes fail (kcache must then leave torch.compile alone)."""

import runpy
import sys

import torch

args = sys.argv[1:]
version = args[args.index("--as-version") + 1]
del args[args.index("--as-version"):args.index("--as-version") + 2]
torch.__version__ = torch.torch_version.TorchVersion(version)
if "--without-traced-probe" in args:
    args.remove("--without-traced-probe")
    from kcache._torch_adaptor import drift

    real = drift.core_required
    drift.core_required = lambda: {**real(), "a probe this test makes fail": False}
script = "examples/train_regional.py"
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")
