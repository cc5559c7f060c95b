"""The PyTorch adaptor fails loudly when the private APIs it relies on drift:
every entry of its checklist is present on the pinned torch, a missing one
is named by check_torch(), and the precompiled path's guard parsing still
reads the guard text this torch prints."""

from __future__ import annotations

import pytest
import torch

from kcache import _torch_adaptor as adaptor
from harness.jobs import run_job


def test_every_private_api_the_adaptor_uses_is_present():
    missing = [name for name, ok in adaptor._required().items() if not ok]
    assert missing == []
    assert adaptor.releases.facts(adaptor.torch_version()) is not None, "this torch is outside the window"
    adaptor.check_torch()
    assert adaptor.support().path == "precompiled" and adaptor.support().message is None


def test_what_carrying_a_graph_needs_is_present():
    """The traced path off the thread (graph_ship.py) checks its own needs
    when it first carries a graph, not at start-up (a warm start imports no
    Inductor compiler module): the drift test is here."""
    from kcache._torch_adaptor import graph_ship

    assert [name for name, ok in graph_ship.required().items() if not ok] == []
    assert adaptor.graph_ship_missing() == []


def test_a_missing_api_is_named(monkeypatch):
    monkeypatch.setattr(adaptor, "_required", lambda: {"torch._dynamo.aot_compile.X": False})
    with pytest.raises(adaptor.TorchDrift, match="torch._dynamo.aot_compile.X"):
        adaptor.check_torch()


def test_a_torch_outside_the_window_is_refused_unless_allowed(monkeypatch):
    from kcache import settings

    monkeypatch.setattr(adaptor, "torch_version", lambda: "9.9.9")
    monkeypatch.delenv("KCACHE_ALLOW_UNTESTED_TORCH", raising=False)
    with pytest.raises(adaptor.TorchDrift, match=r"supports torch 2\.13, 2\.14, 2\.15 .*found"):
        adaptor.check_torch(settings.enabled("KCACHE_ALLOW_UNTESTED_TORCH"))
    monkeypatch.setenv("KCACHE_ALLOW_UNTESTED_TORCH", "1")
    adaptor.check_torch(settings.enabled("KCACHE_ALLOW_UNTESTED_TORCH"))


@pytest.mark.parametrize("version,release", [
    ("2.13.0", "2.13"), ("2.13.1", "2.13"), ("2.14.1+cu130", "2.14"), ("2.15.0", "2.15"),
    ("2.15.2+cpu", "2.15"), ("2.16.0a0+git0123abc", "2.16"), ("2.12.1", "2.12"), ("3.0.0", "3.0"),
])
def test_every_patch_release_of_a_supported_release_is_supported(version, release):
    assert adaptor.releases.release_of(version) == release
    assert (adaptor.releases.facts(version) is not None) == (release in adaptor.releases.SUPPORTED)


def _random_support_case(rng):
    version = rng.choice(["2.12.1", "2.13.0", "2.13.4", "2.14.1", "2.15.0", "2.16.0", "3.1.0"])
    traced = {f"t{i}": rng.random() > 0.2 for i in range(rng.randint(0, 3))}
    precompiled_only = {f"p{i}": rng.random() > 0.2 for i in range(rng.randint(0, 3))}
    return version, {**traced, **precompiled_only}, traced, rng.random() > 0.5


def test_the_support_rule_never_uses_a_path_whose_facts_do_not_hold():
    """Generated cases (versions in and outside the window, any mix of
    missing facts, the override on or off): the precompiled path only with
    every fact and a supported release (or the override), the traced path
    only with its own facts, and a message whenever it is not everything."""
    import random

    rng = random.Random(29)
    seen = set()
    for _ in range(400):
        version, required, traced, allow = _random_support_case(rng)
        s = adaptor.decide_support(version, required, traced, allow)
        in_window = adaptor.releases.facts(version) is not None
        seen.add(s.path)
        if s.path == "precompiled":
            assert all(required.values()) and (in_window or allow)
            assert (s.message is None) == in_window
        elif s.path == "traced":
            assert all(traced.values()) and not (all(required.values()) and (in_window or allow))
            assert "precompiled regions are off" in s.message
        else:
            assert s.path == "stock" and not all(traced.values())
            assert "torch.compile runs unchanged" in s.message
        if s.path != "precompiled" and not in_window:
            assert f"torch {version} is outside the supported releases (2.13, 2.14, 2.15)" in s.message
    assert seen == {"precompiled", "traced", "stock"}  # the generator reaches every outcome


class _Scaled(torch.nn.Module):
    def __init__(self, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.eps = 1e-3
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * self.layer_idx + self.eps


def test_guarded_constants_are_read_from_this_torchs_guards(tmp_path, monkeypatch):
    """aot_guarded_constants parses PyTorch's printed guard tree: if the
    format drifts, the constants list comes back empty and this fails."""
    from kcache.precompiled import call

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    fn = adaptor.aot_compile_call(call, (_Scaled(2), torch.randn(3, 4)), {}, None, None, None)
    constants = adaptor.aot_guarded_constants(fn, "block")
    assert ".layer_idx" in constants and ".eps" in constants
    assert adaptor.aot_guard_check(fn, _Scaled(2), torch.randn(3, 4))
    assert not adaptor.aot_guard_check(fn, _Scaled(3), torch.randn(3, 4))
    assert "layer_idx" in adaptor.aot_guard_failure(fn, _Scaled(3), torch.randn(3, 4))
    # kcache's bytes drop PyTorch's copies of whole module sources, keep the
    # checksums, and load back into a function that computes the same.
    from kcache.precompiled import entries

    data = adaptor.serialize_aot(fn)
    assert len(data) < len(type(fn).serialize(fn).serialized_data)
    assert all(len(s["sha256"]) == 64 for s in adaptor.inlined_sources(fn))
    again = adaptor.deserialize_aot(data, entries.F_GLOBALS)
    block, x = _Scaled(2), torch.randn(3, 4)
    assert torch.equal(adaptor.aot_run(again, block, x), adaptor.aot_run(fn, block, x))


def _private_torch_uses(path) -> list[str]:
    """`torch._x...` attribute chains and `from torch._x import` in one file."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id == "torch" and node.value is base:
                found.append(f"{path.name}:{node.lineno}: torch.{node.attr}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch._"):
            found.append(f"{path.name}:{node.lineno}: from {node.module}")
        if isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("torch._")]
    return found


def test_no_private_torch_api_outside_the_adaptor():
    """Every private PyTorch name is reached through kcache._torch_adaptor
    (one module per idea there, checked by check_torch()); the package's
    other modules use torch's public API only."""
    import pathlib

    import kcache

    package = pathlib.Path(kcache.__file__).parent
    outside = [p for p in package.rglob("*.py")
               if p.name != "_torch_adaptor_imports.py" and "_torch_adaptor" not in p.parts]
    assert len(outside) > 10  # the package's modules were found (a positive control)
    leaks = [use for p in sorted(outside) for use in _private_torch_uses(p)]
    assert leaks == []


def test_the_private_api_scan_finds_a_leak(tmp_path):
    """The scan above can fail: it names each kind of private use."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text("import torch\nimport torch._dynamo\nfrom torch._inductor import config\n"
                     "torch._dynamo.reset()\nx = torch.nn.Linear\ns = 'torch._dynamo in a string'\n")
    assert _private_torch_uses(leaky) == ["leaky.py:2: import torch._dynamo",
                                          "leaky.py:3: from torch._inductor", "leaky.py:4: torch._dynamo"]


def test_the_config_key_imports_no_compiler_and_equals_pytorchs_own():
    """Computing a key's config field must not import Inductor's lowering
    stack (2.15's config serializer would: about a second in every warm
    process), and must give what PyTorch's own save_config_portable() gives
    once that stack is imported (releases/v2_15.portable_config)."""
    import sys

    code = """
import sys, torch
from kcache._torch_adaptor import config_key, releases
fast = config_key.config_fingerprint()
fast_dict = releases.portable_config(torch._inductor.config)
lowering = sorted(m for m in ("torch._inductor.lowering", "torch._inductor.scheduler",
                              "torch._inductor.choices") if m in sys.modules)
assert not lowering, lowering
import torch._inductor.choices  # now PyTorch's serializer runs as it does during a compile
assert config_key.config_fingerprint() == fast
assert torch._inductor.config.save_config_portable() == fast_dict
print("ok")
"""
    out = run_job([sys.executable, "-c", code], timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_guard_state_grads_unpickle_on_every_release():
    # Drift: 2.13 and 2.14 assign a guarded tensor's pickled grad as it
    # came (a placeholder where the grad was not in the guard tree), and
    # their facts module carries the fix 2.15 made upstream; a release with
    # the fix needs none. A fake tensor unpickled with a placeholder grad
    # gets None, one with a tensor grad keeps it.
    import inspect

    from torch._dynamo.guards import GuardsStatePickler, _Missing

    from kcache._torch_adaptor import releases

    facts = releases.facts(torch.__version__) or releases.newest()
    source = inspect.getsource(GuardsStatePickler._unpickle_tensor)
    fixed_upstream = "isinstance(grad, torch.Tensor)" in source
    hook = getattr(facts, "guards_state_unpickling", None)
    assert (hook is None) == fixed_upstream, (facts.RELEASE, source)
    assert list(inspect.signature(GuardsStatePickler._unpickle_tensor).parameters) == [
        "meta_tensor", "device", "pytype", "dispatch_keys_raw", "grad"]
    meta = torch.empty(3, device="meta", requires_grad=True)
    keys = torch._C._dispatch_keys(torch.zeros(3)).raw_repr()
    with hook() if hook else __import__("contextlib").nullcontext():
        missing = GuardsStatePickler._unpickle_tensor(meta, torch.device("cpu"), torch.Tensor, keys,
                                                      _Missing("tensor guard tree"))
        assert missing.grad is None
    if hook:  # the fault the hook covers, outside it
        with pytest.raises(TypeError, match="grad"):
            GuardsStatePickler._unpickle_tensor(meta, torch.device("cpu"), torch.Tensor, keys,
                                                _Missing("tensor guard tree"))


def test_a_load_builds_each_kernels_build_options_once_and_the_same():
    """same_build_options (kcache/_torch_adaptor/precompiled.py): while a
    region loads, PyTorch's loader gets one CppTorchDeviceOptions per
    argument list, copied, with the command line a fresh one has; outside
    a load the real class is back. Fails loudly when PyTorch's code cache
    stops building its options through that name."""
    from torch._inductor import codecache, cpp_builder
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    from kcache._torch_adaptor.precompiled import same_build_options

    real = codecache.CppTorchDeviceOptions
    assert real is cpp_builder.CppTorchDeviceOptions, "PyTorch's loader builds its options elsewhere now"

    def line(o):
        return cpp_builder.CppBuilder(name="o", sources="i", BuildOption=o).get_command_line()

    built = []
    original = real.__init__
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(real, "__init__", lambda self, *a, **k: (built.append(k), original(self, *a, **k))[1])
        args = [{"vec_isa": pick_vec_isa(), "device_type": "cpu", "compile_only": c} for c in (True, False)]
        fresh = [line(real(**a)) for a in args]
        built.clear()
        with same_build_options():
            first = [codecache.CppTorchDeviceOptions(**a) for a in args]
            again = [codecache.CppTorchDeviceOptions(**a) for a in args]
            again[0].precompiled_header = "x.gch"
            again[0]._cflags.append("-DMINE")
        assert len(built) == 2  # one per argument list
        assert [line(o) for o in first] == fresh and line(again[1]) == fresh[1]
        assert "-DMINE" not in line(first[0]) and first[0].precompiled_header is None
        assert codecache.CppTorchDeviceOptions is real


def test_kernel_library_builds_go_through_the_hooked_function():
    """Compile workers share kernel libraries through a hook on Inductor's
    _worker_compile_cpp (kcache/_torch_adaptor/cpp_build.py): this torch still
    builds them there, and the hook sees a build and can be undone."""
    from torch._inductor import codecache

    assert adaptor.library_build_hook_available()
    real = codecache._worker_compile_cpp
    seen = []
    undo = adaptor.hook_library_builds(lambda target, build: seen.append(target))
    try:
        class Builder:
            def __init__(self, target):
                self.target = target

            def get_target_file_path(self):
                return self.target

        codecache._worker_compile_cpp("/nonexistent.lock", (Builder("/nonexistent/k.main.so"),))
        assert seen == ["/nonexistent/k.main.so"]
    finally:
        undo()
    assert codecache._worker_compile_cpp is real
