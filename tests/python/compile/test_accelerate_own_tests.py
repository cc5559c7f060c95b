"""Accelerate's own regional-compilation tests (vendored/accelerate_test_compile.py,
upstream tests/test_compile.py at a pinned commit) run against kcache.

Each route puts kcache's compile_regions where the vendored file reads
`compile_regions`: through kcache.accelerate.install() (Accelerate's own
name rebound, the file imported afterwards) and directly; on the
precompiled path (the default) and the traced one (KCACHE_PRECOMPILED=0).
The three CPU tests must run and pass; a route that runs none of them
fails. The positive control wraps each compiled block the way kcache did
before it subclassed OptimizedModule (a plain nn.Module holding
`_orig_mod`): all three must fail against it.

The reference: Accelerate 1.16's own compile_regions fails
test_regions_are_compiled at this commit (1.16 shallow-copies each block, so
`_orig_mod` is a copy, not the model's block) and passes the other two;
kcache keeps the original blocks (docs/compatibility.md).
"""

from __future__ import annotations

import importlib.util
import pathlib
import unittest

import pytest
import torch

import kcache
import kcache.accelerate

VENDORED = pathlib.Path(__file__).parent / "vendored" / "accelerate_test_compile.py"
CPU_TESTS = {"test_regions_are_compiled", "test_extract_model_keep_torch_compile",
             "test_extract_model_remove_torch_compile"}


def load_vendored(name: str):
    """A fresh copy of the vendored module (its imports resolved now)."""
    spec = importlib.util.spec_from_file_location(f"accelerate_test_compile_{name}", VENDORED)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_cpu_tests(mod) -> unittest.TestResult:
    loader = unittest.defaultTestLoader
    suite = unittest.TestSuite(loader.loadTestsFromName(n, mod.RegionalCompilationTester) for n in sorted(CPU_TESTS))
    result = unittest.TestResult()
    suite.run(result)
    return result


def outcome(result: unittest.TestResult) -> dict[str, str]:
    out = {n: "passed" for n in CPU_TESTS}
    for case, _ in result.failures + result.errors:
        out[case._testMethodName] = "failed"
    for case, _ in result.skipped:
        out[case._testMethodName] = "skipped"
    return out


class _PlainWrapper(torch.nn.Module):
    """kcache's block wrapper before it was an OptimizedModule: the control."""

    def __init__(self, compiled: torch.nn.Module) -> None:
        super().__init__()
        self._orig_mod = compiled._orig_mod
        self.__dict__["_kc_compiled"] = compiled

    def forward(self, *args, **kwargs):
        return self.__dict__["_kc_compiled"](*args, **kwargs)


def broken_compile_regions(module, **kwargs):
    compiled = kcache.compile_regions(module, **kwargs)
    for name, sub in list(compiled.named_modules()):
        if isinstance(sub, torch._dynamo.eval_frame.OptimizedModule) and name:
            parent, _, leaf = name.rpartition(".")
            compiled.get_submodule(parent).add_module(leaf, _PlainWrapper(sub))
    return compiled


@pytest.mark.parametrize("path", ["precompiled", "traced"])
@pytest.mark.parametrize("route", ["install", "direct"])
def test_accelerate_compile_tests_pass_on_kcache(route, path, monkeypatch):
    monkeypatch.setenv("KCACHE_PRECOMPILED", "1" if path == "precompiled" else "0")
    if route == "install":
        kcache.accelerate.install()
        try:
            mod = load_vendored(f"{route}_{path}")
        finally:
            kcache.accelerate.uninstall()
        assert mod.compile_regions is kcache.compile_regions
    else:
        mod = load_vendored(f"{route}_{path}")
        mod.compile_regions = kcache.compile_regions
    result = run_cpu_tests(mod)
    assert result.testsRun == len(CPU_TESTS)
    details = "\n".join(text for _, text in result.failures + result.errors + result.skipped)
    assert outcome(result) == {n: "passed" for n in CPU_TESTS}, details


def test_accelerate_compile_tests_fail_on_a_plain_wrapper():
    """Positive control: the vendored tests tell a wrapper that is not an
    OptimizedModule apart."""
    mod = load_vendored("control")
    mod.compile_regions = broken_compile_regions
    result = run_cpu_tests(mod)
    assert result.testsRun == len(CPU_TESTS)
    assert outcome(result) == {n: "failed" for n in CPU_TESTS}


def test_the_reference_accelerates_own_function():
    """What Accelerate 1.16's own compile_regions does with its own tests
    (not kcache): a newer Accelerate that changes it fails here, and
    docs/compatibility.md's note is then out of date."""
    mod = load_vendored("accelerate")
    assert mod.compile_regions.__module__.startswith("accelerate")
    result = run_cpu_tests(mod)
    assert outcome(result) == {"test_regions_are_compiled": "failed",
                               "test_extract_model_keep_torch_compile": "passed",
                               "test_extract_model_remove_torch_compile": "passed"}
