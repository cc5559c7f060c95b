"""Precompiled regions never give a false hit and never lose a job: a changed
source file that the key does not cover is caught after loading, a guard
that fails at run time sends the block to the traced path, and corrupt
stored bundles are refused and compiled again."""

from __future__ import annotations

import textwrap

import pytest

from kc_testing import REPO
from stack_job import run_stack

HELPER = "def act(x):\n    return x.relu() * {factor}\n"
BLOCK = textwrap.dedent("""
    import torch
    import helper_mod

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return x + helper_mod.act(self.lin(x))
""")
def write_sources(tmp_path, factor=2):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "blk_mod.py").write_text(BLOCK)
    (src / "helper_mod.py").write_text(HELPER.format(factor=factor))
    return src


def run(tmp_path, name):
    return run_stack(tmp_path, name, 2)


@pytest.mark.slow
def test_changed_inlined_source_is_caught_after_loading(tmp_path):
    """Over a minute: a cold compile, a warm process that catches the change,
    and a compile of the changed source."""
    src = write_sources(tmp_path)
    cold, _ = run(tmp_path, "cold")
    assert cold["kcache"]["precompiled_traces"] == 1 and cold["diff"] < 1e-5
    # Same key (helper_mod defines no class of the block), other code: the
    # recorded checksum of the inlined act() no longer matches.
    (src / "helper_mod.py").write_text(HELPER.format(factor=3))
    warm, log = run(tmp_path, "warm")
    assert warm["kcache"]["hits_node"] == 0 and warm["kcache"]["restore_failures"] == 1
    assert warm["kcache"]["precompiled_fallbacks"] == 1
    assert "source changed since it was compiled: helper_mod:1-3" in log
    assert warm["diff"] < 1e-5  # the new code ran, not the stored one
    # A file the key covers: editing the block's own module is a new key, a miss.
    (src / "blk_mod.py").write_text(BLOCK.replace("x + helper", "x - helper"))
    edited, _ = run(tmp_path, "edited")
    assert edited["kcache"]["precompiled_traces"] == 1 and edited["kcache"]["hits_node"] == 0
    assert edited["diff"] < 1e-5


@pytest.mark.slow
@pytest.mark.fresh_node  # the ISA probes entry is one of the stored files
def test_corrupt_variant_and_index_are_refused_and_compiled_again(tmp_path):
    """Over a minute: four processes, two of them compiling what was refused."""
    write_sources(tmp_path)
    run(tmp_path, "cold")
    files = [p for p in (tmp_path / "node" / "objects").rglob("*") if p.is_file()]
    assert len(files) == 4  # ISA probes, machine facts, index, variant
    for p in files:
        b = bytearray(p.read_bytes())
        b[len(b) // 2] ^= 0xFF
        p.write_bytes(bytes(b))
    again, _ = run(tmp_path, "again")
    # The index is refused on read (and deleted) and traced again; the
    # corrupt variant is found when the lease holder publishes its fresh
    # one, and replaced. The probes are not read: the node's record of the
    # ISA checks (node/host/) answers Inductor without them.
    assert again["kcache"]["client"]["refused"] == 2
    assert again["kcache"]["precompiled_traces"] == 1 and again["diff"] < 1e-5
    # Without that record the corrupt machine-facts record and the corrupt
    # probes are fetched, refused and made again (the probes run for real).
    for record in (tmp_path / "node" / "host").glob("isa-checks-*.json"):
        record.unlink()
    third, _ = run(tmp_path, "third")
    assert third["kcache"]["client"]["refused"] == 2 and third["kcache"]["precompiled_traces"] == 0
    assert third["kcache"]["isa_probes_run"] > 0
    assert third["kcache"]["hits_node"] == 1 and third["diff"] < 1e-5
    fourth, _ = run(tmp_path, "fourth")  # everything stored is whole now
    assert fourth["kcache"]["client"]["refused"] == 0 and fourth["kcache"]["hits_node"] == 1


@pytest.mark.parametrize("watch", [True, False])
def test_a_guarded_value_changed_after_the_first_call_is_seen(tmp_path, monkeypatch, watch):
    """config.scale, read in forward, changes after the first call. With
    the per-call watch (issue 49) each block sees it before the call and
    goes through its first call's path again; without it (collect patched
    out), PyTorch's kept guard (CONSTANT_MATCH) fails and the block takes
    the traced path. Either way the output follows the change."""
    import sys

    import torch

    import kcache
    import kcache.guards.call_watch

    sys.path.insert(0, str(REPO / "tests"))
    from models import blocks

    if not watch:
        monkeypatch.setattr(kcache.guards.call_watch, "collect", lambda *a, **k: None)
    monkeypatch.setenv("KCACHE_LOCAL_DIR", str(tmp_path / "node"))
    monkeypatch.setenv("KCACHE_PRECOMPILED", "1")
    kcache.configure(local_dir=str(tmp_path / "node"))
    torch.manual_seed(0)
    config = blocks.Config()
    model = blocks.Stack([blocks.ConfigFlag(config, layer_idx=i) for i in range(2)])
    compiled = kcache.compile_regions(model)
    x, = blocks._tokens()
    with torch.no_grad():
        assert torch.allclose(compiled(x), model(x), atol=1e-5)
        before = kcache.stats()
        config.scale = 0.125  # read in forward: guarded (CONSTANT_MATCH)
        assert torch.allclose(compiled(x), model(x), atol=1e-5)
    after = kcache.stats()
    if watch:
        assert after["precompiled_rechecks"] - before["precompiled_rechecks"] == 2  # each block, once
    else:
        assert after["precompiled_guard_failures"] - before["precompiled_guard_failures"] == 2


def test_an_error_on_the_precompiled_path_is_the_traced_path_not_a_crash(tmp_path, monkeypatch):
    import torch

    import kcache
    from kcache.keys import block_key as precompiled_key

    def broken(block):
        raise TypeError("an attribute kcache cannot describe")

    monkeypatch.setenv("KCACHE_PRECOMPILED", "1")
    kcache.configure(local_dir=str(tmp_path / "node"))
    monkeypatch.setattr(precompiled_key, "block_description", broken)
    torch.manual_seed(0)
    stack = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])
    holder = torch.nn.Module()
    holder.blocks = stack
    compiled = kcache.compile_regions(holder)
    before = kcache.stats()
    x = torch.randn(2, 4)
    with torch.no_grad():
        out = compiled.blocks[1](compiled.blocks[0](x))
        assert torch.allclose(out, stack[1](stack[0](x)), atol=1e-6)
    after = kcache.stats()
    assert after["precompiled_fallbacks"] - before["precompiled_fallbacks"] == 2
    assert after["precompiled_blocks"] == before["precompiled_blocks"]


def test_hooks_inside_a_block_send_it_to_the_traced_path(tmp_path, monkeypatch):
    """Issue 32, cause 2: hooks are in neither the key nor the guards a
    precompiled function keeps, so it would run the hooks its cold process
    had. A block with a hook on any submodule, registered before or after
    compile_regions, or a global module hook, takes the traced path and the
    hook runs; blocks without hooks stay precompiled (the positive control).
    (Hooks of the block's own run eagerly around its precompiled forward:
    test_precompiled_in_place.py.)"""
    import torch

    import kcache

    monkeypatch.setenv("KCACHE_PRECOMPILED", "1")
    kcache.configure(local_dir=str(tmp_path / "node"))
    torch.manual_seed(0)
    stack = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
                                 for _ in range(3)])
    holder = torch.nn.Module()
    holder.blocks = stack
    calls = {"n": 0}

    def double(module, args, out):
        calls["n"] += 1
        return out * 2

    stack[1][0].register_forward_hook(double)  # a submodule's hook, before compiling
    compiled = kcache.compile_regions(holder)
    x = torch.randn(2, 4)

    def through(blocks):
        y = x
        for b in blocks:
            y = b(y)
        return y

    def step():
        before, calls["n"] = kcache.stats(), 0
        with torch.no_grad():
            want = through(stack)
            got = through(compiled.blocks)
        after = kcache.stats()
        assert torch.allclose(got, want, atol=1e-6), (got, want)
        return {k: after[k] - before[k] for k in ("precompiled_fallbacks", "precompiled_blocks")}, calls["n"]

    delta, ran = step()
    assert ran == 2  # eager's call and kcache's: the hook was not compiled away
    assert delta == {"precompiled_fallbacks": 1, "precompiled_blocks": 2}, delta
    stack[0][2].register_forward_hook(double)  # after compiling, on another block's submodule
    delta, ran = step()
    assert ran == 4 and delta["precompiled_fallbacks"] == 1, delta
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda m, a, out: out + 1 if isinstance(m, torch.nn.Linear) else None)
    try:
        delta, _ = step()  # a global hook: every block, the last one included
        assert delta["precompiled_fallbacks"] == 1, delta
    finally:
        handle.remove()
