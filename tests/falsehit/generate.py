"""Generated blocks and mutations for the false-hit fuzzer (issue 32).

A case is one generated Python module: a block class whose forward is a
random sequence of steps, each reading one Python feature that decides what
forward computes (an attribute holding a function, a partial, a closure or
a module; a module global, a bool flag, a registry dict, a global function;
a class attribute, a property, a method, a base-class method, a
submodule's forward; a per-instance constant; a dict indexed by the
input's dtype, which only a trace check covers; an object of a class
defined in a function's scope, held in a global or a plain attribute, as
transformers 5's `kernels` wrappers are), with alternatives defined
beside it. A mutation is a snippet run after the module is imported and
the model built, before compile_regions: it changes one of those features
at run time, the way monkeypatching, configuration and hooks do, without
changing the file. The fuzzer compiles a case cold under one list of
mutations and runs it warm under another; whatever path kcache takes, the
warm output must equal eager's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

DIM = 8
BLOCKS = 3

# Each step: (feature name, forward line). Every feature's mutations change
# what that line computes.
STEPS = {
    "attr_fn": "y = self.fn(y)",
    "partial": "y = self.part(y)",
    "closure": "y = self.clo(y)",
    "attr_module": "y = self.act_mod(y)",
    "global_float": "y = y * SCALE",
    "global_bool": "y = y + 1.0 if FLAG else y",
    "registry": "y = TABLE['act'](y)",
    "global_fn": "y = helper(y)",
    "class_attr": "y = y * self.K",
    "property": "y = y * self.gain",
    "method": "y = self.extra(y)",
    "base_method": "y = self.mix(y)",
    "sub_forward": "y = self.sub(y)",
    "constant": "y = y + self.eps",
    "nested_global": "y = nested(y)",
    "dtype_table": "y = y * DTYPES[y.dtype]",
}

# Objects of classes defined in a function's scope, which PyTorch's own
# serialized guards cannot rebuild (transformers 5's `kernels` wrappers are
# such: apply_rotary_pos_emb is an instance of a local class). Drawn by a
# generator of their own, so that adding them moved no existing seed's case.
LOCAL_STEPS = {
    "local_global": "y = LOCAL(y)",
    "local_attr": "y = self._funcs['f'](y)",
}

# Features whose guards have no portable check (a dict item indexed by a
# dtype): kcache checks them by one Dynamo trace per variant and process
# (docs/precompiled.md "Trace checks"). every_kind leaves them out: there
# each of its 42 warm runs would add a trace; tests/python/compile/test_trace_check.py
# is their named case.
TRACE_CHECKED = {"dtype_table"}

# What a mutation changes: {feature it touches: [snippets]}. `m` is the
# case's module, `model` the built model, `blocks` its blocks.
MUTATIONS = {
    "attr_fn": ["for b in blocks: b.fn = m.act_b", "for b in blocks: b.fn = torch.sigmoid",
                "blocks[1].fn = m.act_b", "for b in blocks: b.fn = lambda x: x * 3.0"],
    "partial": ["for b in blocks: b.part = functools.partial(torch.mul, other=0.25)",
                "for b in blocks: b.part = functools.partial(torch.add, other=2.0)"],
    "closure": ["for b in blocks: b.clo = m.make_closure(-1.5)", "blocks[2].clo = m.make_closure(4.0)"],
    "attr_module": ["for b in blocks: b.act_mod = torch.nn.Sigmoid()",
                    "for b in blocks: b.act_mod = m.Scaler(0.3)"],
    "global_float": ["m.SCALE = 0.5", "m.SCALE = -2.0"],
    "global_bool": ["m.FLAG = not m.FLAG"],
    "registry": ["m.TABLE['act'] = torch.sigmoid", "m.TABLE['act'] = m.act_b",
                 "m.TABLE['act'] = lambda x: x - 1.0"],
    "global_fn": ["m.helper = m.helper_alt", "m.helper = lambda x: x * -1.0"],
    "class_attr": ["m.Block.K = 5.0", "m.Block.K = -0.5"],
    "property": ["m.Block.gain = property(lambda self: 7.0)"],
    "method": ["m.Block.extra = m.extra_alt"],
    "base_method": ["m.Base.mix = m.mix_alt"],
    "sub_forward": ["m.Sub.forward = m.sub_forward_alt"],
    "constant": ["for b in blocks: b.eps = 0.75"],
    "nested_global": ["m.INNER = 9.0", "m.inner = m.inner_alt"],
    "dtype_table": ["m.DTYPES[torch.float32] = 3.0", "m.DTYPES = {torch.float32: -0.5}"],
    "forward": ["m.Block.forward = m.forward_alt",
                "blocks[0].forward = types.MethodType(m.forward_alt, blocks[0])"],
    "hooks": ["blocks[1].register_forward_hook(lambda mod, i, o: o * 2.0)",
              "blocks[0].sub.register_forward_hook(lambda mod, i, o: o + 1.0)",
              "blocks[2].register_forward_pre_hook(lambda mod, i: (i[0] * 0.5,))",
              "blocks[0].register_forward_hook(lambda mod, a, k, o: o - 1.0, with_kwargs=True)",
              "blocks[1].sub.lin.register_forward_pre_hook(lambda mod, i: (i[0] + 1.0,))",
              "torch.nn.modules.module.register_module_forward_hook(lambda mod, i, o: o)",
              "blocks[1].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2.0,))",
              "blocks[0].sub.register_full_backward_pre_hook(lambda mod, go: (go[0] * 0.5,))",
              "torch.nn.modules.module.register_module_full_backward_hook(lambda mod, gi, go: None)"],
    "local_global": ["m.LOCAL = m.make_local(-2.0)", "m.LOCAL = m.make_local_alt()",
                     "type(m.LOCAL).forward = m.local_forward_alt"],
    "local_attr": ["for b in blocks: b._funcs['f'] = m.make_local(3.0)",
                   "blocks[1]._funcs['f'] = m.make_local_alt()"],
    "noop": ["pass", "m.SCALE = m.SCALE", "for b in blocks: b.fn = b.fn"],
}

_MODULE = '''"""Generated by tests/falsehit/generate.py (seed {seed})."""
import functools
import types

import torch

SCALE = {scale}
FLAG = {flag}
INNER = {inner}
TABLE = {{"act": torch.tanh}}
DTYPES = {{torch.float32: {c9}}}


def helper(x):
    return x * {c1}


def helper_alt(x):
    return x * {c2}


def inner(x):
    return x + INNER


def inner_alt(x):
    return x - INNER


def nested(x):
    return inner(x) * 0.5


def act_a(x):
    return torch.tanh(x) * {c3}


def act_b(x):
    return torch.sigmoid(x) + {c4}


def _local_class():
    # One class for every instance, defined in a function's scope (as the
    # `kernels` package defines its wrappers).
    class Local(torch.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, x):
            return x * self.k
    return Local


def _local_class_alt():
    class Local(torch.nn.Module):
        def forward(self, x):
            return x + 0.25
    return Local


LocalCls, LocalAlt = _local_class(), _local_class_alt()


def make_local(k):
    return LocalCls(k)


def make_local_alt():
    return LocalAlt()


def local_forward_alt(self, x):
    return x - 1.0


LOCAL = make_local({c10})


def make_closure(k):
    def f(x):
        return x * k
    return f


class Scaler(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


class Base(torch.nn.Module):
    def mix(self, x):
        return x + {c5}


def mix_alt(self, x):
    return x - {c5}


class Sub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear({dim}, {dim})

    def forward(self, x):
        return self.lin(x)


def sub_forward_alt(self, x):
    return self.lin(x) * 0.5


class Block(Base):
    K = {k}

    def __init__(self):
        super().__init__()
        self.sub = Sub()
        self.lin = torch.nn.Linear({dim}, {dim})
        self.fn = act_a
        self.part = functools.partial(torch.mul, other={c6})
        self.clo = make_closure({c7})
        self.act_mod = torch.nn.Tanh()
        self.eps = {eps}
        self.__dict__["_funcs"] = {{"f": make_local({c11})}}  # a plain attribute, not a submodule

    @property
    def gain(self):
        return {c8}

    def extra(self, x):
        return x * 1.5

    def forward(self, x):
        y = self.lin(x)
{body}
        return x + y


def extra_alt(self, x):
    return x * -3.0


def forward_alt(self, x):
    return x - self.lin(x)


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range({blocks}))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x
'''


# Call signatures a compared call may switch to after the first step
# (runner.py `--switch-signature`): a signature's first call comes after the
# mutations, and runs the checks of a variant loaded for it (a class member
# replaced between training's and eval's first calls was a false hit).
SIGNATURES = ("eval", "no_grad", "batch")


@dataclass
class Case:
    seed: int
    name: str
    source: str
    features: list[str]
    cold: list[str] = field(default_factory=list)  # mutations run in the cold process
    warm: list[list[str]] = field(default_factory=list)  # one list per warm run
    # per warm run, the compared call's signature: "same" as the first
    # step's, or one of SIGNATURES (switch_signatures)
    signatures: list[str] = field(default_factory=list)


def switch_signatures(c: Case) -> Case:
    """Every other warm run compares a call under another signature than
    its first step's: one of SIGNATURES per case, in turn by seed (any
    three consecutive seeds cover them all; the case's mutations stay what
    they were)."""
    other = SIGNATURES[c.seed % len(SIGNATURES)]
    c.signatures = ["same" if i % 2 == 0 else other for i in range(len(c.warm))]
    return c


def _value(rng: random.Random) -> str:
    return repr(round(rng.choice([-1, 1]) * rng.uniform(0.3, 2.5), 3))


def every_kind(seed: int = 0) -> Case:
    """One case whose forward reads every feature, warm once per mutation
    snippet (the kinds issue 32 found, as named regression cases)."""
    out = case(seed, 0, features=sorted(set(STEPS) - TRACE_CHECKED) + sorted(LOCAL_STEPS))
    out.name, out.cold = f"fz_every_{seed}", []
    out.warm = [[]] + [[s] for kind in sorted(set(MUTATIONS) - TRACE_CHECKED) for s in MUTATIONS[kind]]
    return out


# One run-time change of each module global the all-features block reads
# (a float, a bool, a registry entry holding a lambda, a global function
# replaced by a lambda, a global read by a nested function and that
# function, an object of a local class and that class's forward):
# globals_changed's cold run.
GLOBAL_CHANGES = ["m.SCALE = 0.5", "m.FLAG = not m.FLAG", "m.TABLE['act'] = lambda x: x - 1.0",
                  "m.helper = lambda x: x * -1.0", "m.INNER = 9.0", "m.inner = m.inner_alt",
                  "m.LOCAL = m.make_local(-2.0)", "type(m.LOCAL).forward = m.local_forward_alt"]


def globals_changed(seed: int = 0) -> Case:
    """The all-features case with every module global changed before the
    cold run (a compile worker must install them: kcache/background/
    global_state.py); warm once with the same changes (must hit), once
    with none (import-time values: must not), once with one more."""
    out = case(seed, 0, features=sorted(set(STEPS) - TRACE_CHECKED) + sorted(LOCAL_STEPS))
    out.name, out.cold = f"fz_globals_{seed}", list(GLOBAL_CHANGES)
    out.warm = [list(GLOBAL_CHANGES), [], GLOBAL_CHANGES + ["m.SCALE = -2.0"]]
    return out


# Hooks of the blocks' own (kcache/precompiled/hooked.py: they run eagerly
# around each block's precompiled forward): hooks_changed's cold run, and
# other hooks of the blocks' own for one of its warm runs.
OWN_HOOKS = ["blocks[1].register_forward_hook(lambda mod, i, o: o * 2.0)",
             "blocks[2].register_forward_pre_hook(lambda mod, i: (i[0] * 0.5,))",
             "blocks[0].register_forward_hook(lambda mod, a, k, o: o - 1.0, with_kwargs=True)"]
OTHER_OWN_HOOKS = ["blocks[1].register_forward_hook(lambda mod, i, o: o * -3.0)",
                   "blocks[2].register_forward_pre_hook(lambda mod, i: (i[0] + 0.25,))",
                   "blocks[0].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2.0,))"]


def hooks_changed(seed: int = 0) -> Case:
    """The all-features case with hooks on every block before the cold run
    (each block's forward precompiled alone, in a compile worker when the
    cold start is background); warm with the same hooks (must hit), with
    other hooks of the blocks' own (must hit too: the hooks are not in the
    region, and run), with none (the whole call's region: a miss) and with
    one more on a submodule (inside the forward: that block traced)."""
    out = case(seed, 0, features=sorted(set(STEPS) - TRACE_CHECKED) + sorted(LOCAL_STEPS))
    out.name, out.cold = f"fz_hooks_{seed}", list(OWN_HOOKS)
    out.warm = [list(OWN_HOOKS), list(OTHER_OWN_HOOKS), [],
                OWN_HOOKS + ["blocks[0].sub.register_forward_hook(lambda mod, i, o: o + 1.0)"]]
    return out


def case(seed: int, warm_runs: int, features: list[str] | None = None) -> Case:
    """Case `seed`: its module's source and `warm_runs` lists of mutations.

    A third of the warm runs repeat the cold run's mutations exactly (they
    must hit: the positive control); the others add one or two mutations,
    mostly of features the forward reads, some of features it does not."""
    rng = random.Random(seed)
    local_rng = random.Random(f"local-{seed}")
    local: list[str] = []
    if features is None:
        features = rng.sample(sorted(STEPS), rng.randint(2, 6))
        local = [f for f in sorted(LOCAL_STEPS) if local_rng.random() < 0.3]
    main = [f for f in features if f in STEPS]
    features = features + local
    body = "\n".join("        " + {**STEPS, **LOCAL_STEPS}[f] for f in features)
    values = {f"c{i}": _value(rng) for i in range(1, 10)}
    values.update(c10=_value(local_rng), c11=_value(local_rng))
    name = f"fz_case_{seed}"
    source = _MODULE.format(seed=seed, scale=_value(rng), flag=rng.choice([True, False]),
                            inner=_value(rng), k=_value(rng), eps=_value(rng), dim=DIM,
                            blocks=BLOCKS, body=body, **values)
    out = Case(seed, name, source, features)
    if rng.random() < 0.3:  # the cold process changed something too ("either direction")
        out.cold = [rng.choice(MUTATIONS[rng.choice(main)])]
    kinds = sorted(k for k in MUTATIONS if k not in LOCAL_STEPS)  # as before LOCAL_STEPS
    for i in range(warm_runs):
        if i % 3 == 0:
            out.warm.append(list(out.cold))
            continue
        picks = []
        for _ in range(rng.choice([1, 1, 2])):
            roll = rng.random()
            kind = (rng.choice(main) if roll < 0.6 else rng.choice(["hooks", "forward"])
                    if roll < 0.8 else rng.choice(kinds))
            picks.append(rng.choice(MUTATIONS.get(kind, MUTATIONS["noop"])))
        if local and local_rng.random() < 0.5:
            picks.append(local_rng.choice(MUTATIONS[local_rng.choice(local)]))
        out.warm.append(list(out.cold) + picks)
    return out
