"""A region whose guards are not all portable still takes the precompiled
path, checked by one Dynamo trace per variant and process (issue 32).

The block reads a module-level dict by the input's dtype: Dynamo guards
`G['__import_scales_mod'].SCALES[torch.float32]`, an item whose index is not
a plain value, so kcache has no portable check for it. A warm process traces
one block (Dynamo only, no Inductor), uses the stored function when that
graph is the one compiled, and checks every other block against that one
trace's guards; a changed dict entry is a different graph: the traced path.
"""

from __future__ import annotations

import json
import textwrap

from stack_job import run_stack

SCALES = "import os, torch\nSCALES = {torch.float32: float(os.environ['SCALE'])}\n"
BLOCK = textwrap.dedent("""
    import torch
    import scales_mod

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return x + self.lin(x).relu() * scales_mod.SCALES[x.dtype]
""")
def run(tmp_path, name, scale):
    return run_stack(tmp_path, name, 3, backward=True, SCALE=str(scale))


def test_one_trace_per_variant_checks_a_region_without_portable_checks(tmp_path):
    """About a minute: a cold compile and two warm processes, each of which
    must trace to check; it cannot be smaller than one compile."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "blk_mod.py").write_text(BLOCK)
    (src / "scales_mod.py").write_text(SCALES)
    cold, log = run(tmp_path, "cold", 2)
    k = cold["kcache"]
    # Positive control: the cold process compiled the region (and traced it
    # once more for the digest a warm process compares with).
    assert k["precompiled_traces"] == 1 and k["precompiled_fallbacks"] == 0, log[-2000:]
    assert k["precompiled_blocks"] == 3 and cold["diff"] < 1e-5
    warm, log = run(tmp_path, "warm", 2)
    k = warm["kcache"]
    assert k["hits_node"] >= 1 and k["precompiled_traces"] == 0 and k["compiles"] == 0, log[-2000:]
    assert k["precompiled_trace_checks"] == 1  # one block traced, not three
    assert warm["graphs"] == 1  # PyTorch's own count: Dynamo produced one graph in this process
    assert k["precompiled_blocks"] == 3 and k["precompiled_check_failures"] == 0
    assert "has no portable check" in log and warm["diff"] < 1e-5
    changed, log = run(tmp_path, "changed", 3)
    k = changed["kcache"]
    assert k["precompiled_trace_checks"] == 1 and k["precompiled_check_failures"] >= 1, log[-2000:]
    assert "differs from the one compiled" in log
    assert changed["diff"] < 1e-5  # the changed model ran, on the traced path
    assert any("trace check" in f for o in changed["regions"] for f in o.get("check_failures", []))
    records = [json.loads(line) for line in (tmp_path / "node" / "misses.jsonl").read_text().splitlines()]
    refused = [r for r in records if r.get("kind") == "check_failure"]
    assert refused and "differs from the one compiled" in refused[-1]["check_failures"][0]
