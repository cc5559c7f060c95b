"""Portable descriptions (kcache/describe.py): the same in two processes
for the same objects, different when what an object computes differs."""

from __future__ import annotations

import functools
import json

import torch

from kc_testing import PYTHON, python_env


from kcache.guards.describe import describe, describe_class
from harness.jobs import run_job

PROBE = r'''
import json, sys, torch
from kcache.guards.describe import describe_class
if sys.argv[1] == "compiled":  # Dynamo wraps nn.Module.__init__ on a process's first trace
    torch.compile(torch.nn.Linear(2, 2), backend="eager")(torch.randn(1, 2))
print(json.dumps(describe_class(torch.nn.Linear)))
'''


def probe(state: str):
    out = run_job([PYTHON, "-c", PROBE, state], timeout=300, env=python_env())
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_a_process_that_compiled_and_one_that_did_not_describe_nn_module_alike():
    # (Two fresh processes: this test's own process has run other tests,
    # which may have changed torch's classes.)
    fresh, compiled = probe("fresh"), probe("compiled")
    assert fresh == compiled and fresh[1] == "torch.nn.modules.linear.Linear"


def _f(x):
    return x + 1


def _g(x):
    return x + 2


def _make(k):
    def inner(x):
        return x * k
    return inner


def test_what_an_object_computes_decides_its_description():
    assert describe(_f) != describe(_g)  # same shape, another constant
    assert describe(_make(2)) == describe(_make(2)) != describe(_make(3))  # closure cells
    assert describe(functools.partial(_f)) != describe(functools.partial(_g))
    assert describe(torch.tanh) != describe(torch.sigmoid)
    assert describe(1.5) != describe(2.5) and describe(True) != describe(1)

    class A(torch.nn.Module):
        def forward(self, x):
            return x

    before = describe_class(A)
    A.forward = lambda self, x: x * 2
    assert describe_class(A) != before  # a method replaced at run time
    A.K = 3
    assert describe_class(A)[2][0] != before[2][0]


class _Exploding(dict):
    """A class attribute whose description raises (its items cannot be read)."""

    def items(self):
        raise RuntimeError("boom")


def test_a_description_that_raises_leaves_no_placeholder_in_the_process_memo():
    """The process shares one class memo between every region's first calls
    (kcache/guards/class_memo.py). A description that raises midway must
    not leave its "recursive" placeholder behind for a later call to take
    as the class's description, nor an open frame that would swallow the
    tags of the next one."""
    from kcache.guards.class_memo import ClassMemo

    class Inner:
        table = _Exploding(a=1)

    class Outer:
        inner = Inner

        def forward(self):
            return 1

    for memo in (ClassMemo(), {}):
        for _ in range(2):
            try:
                describe_class(Outer, 0, memo)
            except RuntimeError:
                pass
            else:
                raise AssertionError("the exploding attribute was not read")
            assert not memo and not getattr(memo, "_open", [])
        Inner.table = {"a": 1}
        fresh = describe_class(Outer, 0, {})
        assert describe_class(Outer, 0, memo) == fresh and memo.get((Outer, 0)) == fresh
        Inner.table = _Exploding(a=1)
