"""The false-hit fuzzer's config mode (issue 67): cases whose mutations are
compiler settings, generated from kcache's own classification of every
config entry (kcache/_torch_adaptor/config_table.py), not listed here.

A flip is one snippet that gives one classified entry a new value of its
type (a bool negated, an int plus one, a float doubled plus one), or one of
the settings that change what a compiled block computes: an Inductor
custom pass (tests/models/passes.py, two factors: two uuids) and the
float32 matmul precision. A run compares kcache's output with stock
torch.compile's under the same settings in the same process (eager is not
the reference where a pass changes the result).

Each case's warm runs, in turn: the cold run's flips (must hit), the pass
toggled against the cold run (the false hit kcache had: a region compiled
with or without it used by a process that is the other way), one neutral
flip added (must hit: no spurious miss) and one keyed flip added (must not
load a region stored under other settings).
"""

from __future__ import annotations

import math
import random
import warnings

from . import generate

PASSES = ["torch._inductor.config.post_grad_custom_post_pass = passes.ScaleFirstOutput(1.5)",
          "torch._inductor.config.post_grad_custom_post_pass = passes.ScaleFirstOutput(2.0)"]
PRECISION = "torch.set_float32_matmul_precision('high')"
SPECIAL = {s: "key" for s in [*PASSES, PRECISION]}


def _new_value(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float) and math.isfinite(value):
        return value * 2 + 1
    return None


def flips() -> dict[str, tuple[str, str]]:
    """{snippet: (entry, class)} for every classified entry of a bool, int
    or float value (the entries that hold passes are the PASSES)."""
    from kcache._torch_adaptor import config_table

    mods = config_table.available()
    out = {}
    for r in config_table.rows():
        if r.cls not in ("key", "neutral") or r.name in config_table.PASS_ENTRIES.get(r.module, ()):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # deprecated entries are flipped too
            new = _new_value(getattr(mods[r.module], r.name))
        if new is not None:
            out[f"setattr(config({r.module!r}), {r.name!r}, {new!r})"] = (f"{r.module}.{r.name}", r.cls)
    return out


def classes() -> dict[str, str]:
    """{snippet: class} of every flip, the special ones included."""
    return {**{s: cls for s, (_, cls) in flips().items()}, **SPECIAL}


def case(seed: int, warm_runs: int) -> generate.Case:
    out = generate.case(seed, 0)
    out.name = f"fz_config_{seed}"
    rng = random.Random(f"config-{seed}")
    pool = flips()
    keyed = sorted(s for s, (_, cls) in pool.items() if cls == "key")
    neutral = sorted(s for s, (_, cls) in pool.items() if cls == "neutral")
    cold = []
    if rng.random() < 0.5:
        cold.append(rng.choice(PASSES))
    if rng.random() < 0.3:
        cold.append(PRECISION)
    if rng.random() < 0.5:
        cold.append(rng.choice(keyed))
    out.cold, out.warm = cold, []
    for i in range(warm_runs):
        kind = i % 4
        if kind == 0:
            out.warm.append(list(cold))
        elif kind == 1:  # the pass toggled: added, taken away, or the other uuid
            without = [s for s in cold if s not in PASSES]
            had = [s for s in cold if s in PASSES]
            other = [p for p in PASSES if p not in had]
            out.warm.append(without + [rng.choice(other)] if not had or rng.random() < 0.5 else without)
        elif kind == 2:
            out.warm.append(cold + [rng.choice(neutral)])
        else:
            out.warm.append(cold + [rng.choice(keyed + [PRECISION])])
    out.features = out.features + ["configs"]
    return out


def keyed_set(snippets: list[str], kinds: dict[str, str]) -> frozenset[str]:
    """The flips of a run that are in the key (what a stored region must match)."""
    return frozenset(s for s in snippets if kinds.get(s) == "key")
