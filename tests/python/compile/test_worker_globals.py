"""Module globals a rank changed at run time reach its compile worker
(kcache/background/global_state.py, docs/cold-start.md "What the worker
rebuilds").

The worker's fresh import is played here by importlib.reload: the
module's code runs again, its globals are back at their import-time
values and its classes are new objects, as in a new process. What the
rank captured must bring the block's result back to the rank's. The
fuzzer's run of the same thing across real processes, with a real
compile worker and the region it built, is test_false_hit_fuzz.py's
test_module_globals_the_cold_rank_changed_reach_the_compile_worker.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import types

import torch

SOURCE = '''
import threading

import torch

SCALE = 1.0
TABLE = {"act": torch.tanh}
BIG = torch.ones(1 << 19)  # 2 MiB: over the bound, left to the checks
LOCK = threading.Lock()  # does not pickle


def inner(x):
    return x + SCALE


def nested(x):
    return inner(x) * 0.5


def helper(x):
    return x * 2.0


def helper_alt(x):
    return x * 3.0


def _make():
    class Local:
        def __init__(self, k):
            self.k = k

        def forward(self, x):
            return x * self.k

        def __call__(self, x):
            return self.forward(x)
    return Local


LocalCls = _make()
LOCAL = LocalCls(2.0)


def local_forward_alt(self, x):
    return x - self.k


class Block(torch.nn.Module):
    def forward(self, x):
        if x is LOCK:
            return x
        return nested(TABLE["act"](helper(x))) + BIG[0] + LOCAL(x)
'''


def test_globals_the_rank_changed_are_installed_after_a_fresh_import(tmp_path, monkeypatch):
    from kcache.background import global_state

    (tmp_path / "kc_globals_case.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    m = importlib.import_module("kc_globals_case")
    try:
        x = torch.randn(4)
        m.SCALE = 0.5
        m.TABLE["act"] = lambda t: t - 1.0  # a lambda: by its code
        m.helper = m.helper_alt  # by name
        m.LOCAL = m.LocalCls(-3.0)  # an object: by its state
        type(m.LOCAL).forward = m.local_forward_alt  # its class's member
        want = m.Block()(x)
        state = pickle.loads(pickle.dumps(global_state.capture(m.Block())))
        captured = state["globals"]["kc_globals_case"]
        assert {"SCALE", "TABLE", "helper", "LOCAL", "inner", "nested"} <= set(captured), sorted(captured)
        assert "BIG" not in captured and "LOCK" not in captured  # over the bound; does not pickle

        importlib.reload(m)  # the worker's import: every change above is gone
        table = m.TABLE
        assert not torch.allclose(m.Block()(x), want)  # the control: they changed the result
        installed = global_state.apply(state)
        assert set(installed) == {f"kc_globals_case.{n}" for n in ("SCALE", "TABLE", "helper", "LOCAL")}
        assert m.TABLE is table  # a dict is updated in place
        assert torch.equal(m.Block()(x), want)
        assert global_state.apply(state) == []  # nothing differs any more
    finally:
        sys.modules.pop("kc_globals_case", None)


def test_what_the_walk_reaches_in_a_transformers_block():
    """GPT-2's block: the globals its code reads in its own module and in
    the modules it calls into (the attention registry's functions), none of
    PyTorch's; captured in a few ms (a one-time cost per region)."""
    from background_job import build_model
    from kcache.background import global_state

    block = build_model("gpt2", 1, 64).transformer.h[0]
    found = global_state.reachable(block)
    gpt2 = found.globals["transformers.models.gpt2.modeling_gpt2"]
    assert {"ALL_ATTENTION_FUNCTIONS", "eager_attention_forward"} <= set(gpt2), sorted(gpt2)
    assert not [m for m in found.globals if m.split(".")[0] in ("torch", "kcache")]
    state = global_state.capture(block)
    assert state["globals"]["transformers.models.gpt2.modeling_gpt2"].keys() == gpt2.keys()
    assert global_state.apply(state) == []  # the same process: nothing to install


def test_a_global_is_installed_only_where_its_content_differs():
    """global_state._same: equal content is the same whatever the objects'
    identities (no pickle memo), an object's state counts, a function goes
    by its code, a recursive value is never the same (installed anyway)."""
    from kcache.background import global_state

    a, b = "x" * 40, "".join(["x"] * 40)  # equal strings, two objects
    assert a is not b and global_state._same({"k": (a, a)}, {"k": (a, b)})
    assert global_state._same(torch.nn.Linear, torch.nn.Linear)
    scale = types.SimpleNamespace(k=2.0)
    assert not global_state._same(scale, types.SimpleNamespace(k=-3.0))  # one description, other state
    assert global_state._same(lambda t: t * 2.0, lambda t: t * 2.0)  # the same code
    assert not global_state._same(lambda t: t * 2.0, lambda t: t * 3.0)
    loop: list = []
    loop.append(loop)
    assert not global_state._same(loop, loop)


def test_one_blocks_globals_are_bounded_in_all(tmp_path, monkeypatch):
    """Every value under the per-value bound, many of them: the capture
    stops at MAX_TOTAL_BYTES (the rest are left to the checks)."""
    from kcache.background import global_state

    names = [f"T{i}" for i in range(40)]
    body = "\n".join(f"{n} = bytes(100_000)" for n in names)
    reads = " + ".join(f"len({n})" for n in names)
    (tmp_path / "kc_many_globals.py").write_text(
        f"import torch\n{body}\n\n\nclass Block(torch.nn.Module):\n"
        f"    def forward(self, x):\n        return x * ({reads})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    m = importlib.import_module("kc_many_globals")
    try:
        carried = global_state.capture(m.Block())["globals"]["kc_many_globals"]
        assert set(carried) == set(names)  # 4 MB in all: under the default bound
        monkeypatch.setattr(global_state, "MAX_TOTAL_BYTES", 1_000_000)
        carried = global_state.capture(m.Block())["globals"]["kc_many_globals"]
        assert 5 <= len(carried) <= 9, len(carried)  # about 100 KB each
    finally:
        sys.modules.pop("kc_many_globals", None)
