"""Region fingerprints: equal for identical blocks, different whenever the
generated code could differ. Graphs come from Dynamo itself (a recording
backend), as they do in kcache's real backend."""

from __future__ import annotations

import pytest
import torch

from kcache.keys.fingerprint import fingerprint_graph


class Block(torch.nn.Module):
    def __init__(self, dim=16, eps=1e-5, act="gelu"):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim, eps=eps)
        self.fc = torch.nn.Linear(dim, dim)
        self.act = act

    def forward(self, x):
        y = self.fc(self.norm(x))
        y = torch.nn.functional.gelu(y) if self.act == "gelu" else torch.relu(y)
        return x + y * 0.5


def fingerprint(module, *inputs, grad=True):
    seen = []

    def backend(gm, example_inputs):
        seen.append(fingerprint_graph(gm, example_inputs))
        return gm.forward

    torch._dynamo.reset()
    with torch.set_grad_enabled(grad):
        torch.compile(module, backend=backend)(*inputs)
    assert len(seen) == 1
    return seen[0]


def x(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def test_identical_blocks_with_different_weights_match():
    torch.manual_seed(0)
    a = fingerprint(Block(), x(2, 16))
    torch.manual_seed(1)
    b = fingerprint(Block(), x(2, 16))
    assert a.canonical == b.canonical


def test_instance_and_attribute_names_do_not_matter():
    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.some_long_name = Block()

        def forward(self, v):
            return self.some_long_name(v)

    inner = fingerprint(Block(), x(2, 16)).canonical
    outer = fingerprint(Outer().some_long_name, x(2, 16)).canonical
    assert inner == outer
    assert "some_long_name" not in outer and "L_self" not in outer


@pytest.mark.parametrize("other", [
    lambda: fingerprint(Block(dim=32), x(2, 32)),               # shapes
    lambda: fingerprint(Block(eps=1e-6), x(2, 16)),             # a float constant
    lambda: fingerprint(Block(act="relu"), x(2, 16)),           # an op
    lambda: fingerprint(Block().to(torch.bfloat16), x(2, 16, dtype=torch.bfloat16)),  # dtype
    lambda: fingerprint(Block(), x(4, 16)),                     # batch size (static shapes)
    lambda: fingerprint(Block(), x(2, 16), grad=False),         # inference: no requires_grad
    lambda: fingerprint(Block(), x(16, 2).t()),                 # stride class
])
def test_anything_that_changes_code_changes_the_fingerprint(other):
    assert other().canonical != fingerprint(Block(), x(2, 16)).canonical


def test_floats_by_exact_bits():
    a = fingerprint(Block(eps=1e-5), x(2, 16)).canonical
    b = fingerprint(Block(eps=1e-5 * (1 + 2**-40)), x(2, 16)).canonical
    assert a != b


def test_input_roles_and_no_device_index():
    fp = fingerprint(Block(), x(2, 16)).canonical
    assert "in:param:" in fp and "in:act:" in fp
    assert "cpu:0" not in fp and "cuda:" not in fp


def test_no_source_locations_or_paths():
    fp = fingerprint(Block(), x(2, 16)).canonical
    assert __file__ not in fp and "test_fingerprint" not in fp and ".py" not in fp


def test_symbolic_dims_when_dynamic():
    seen = []

    def backend(gm, example_inputs):
        seen.append(fingerprint_graph(gm, example_inputs))
        return gm.forward

    torch._dynamo.reset()
    f = torch.compile(Block(), backend=backend, dynamic=True)
    f(x(3, 16))
    assert len(seen) == 1
    assert "T[float32;s0,16;" in seen[0].canonical  # batch dim symbolic, canonically named
    torch._dynamo.reset()
    seen.clear()
    f = torch.compile(Block(), backend=backend, dynamic=True)
    f(x(5, 16))
    second = seen[0].canonical
    torch._dynamo.reset()
    seen.clear()
    torch.compile(Block(), backend=backend, dynamic=True)(x(3, 16))
    assert seen[0].canonical == second  # batch size is not part of a dynamic region
