"""Region keys on real models: never a false hit, never a spurious miss.

Keys come from Dynamo's graphs (kcache.keys.graph_key.key_of_module uses the same
region_key() as the real backend, with a recording backend instead of
Inductor), so these tests run in seconds.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

from kc_testing import PYTHON, REPO, python_env
from kcache import _core
from kcache._torch_adaptor import releases
from kcache.keys.fields import CompileSettings
from kcache.keys.graph_key import key_of_module
from models import zoo
from harness.jobs import run_job


def block_call(model, block_path: str, *model_args):
    """The args and kwargs one block receives inside a real forward."""
    block = model.get_submodule(block_path)
    seen = {}

    def hook(_mod, args, kwargs):
        seen.setdefault("call", (args, kwargs))

    h = block.register_forward_pre_hook(hook, with_kwargs=True)
    with torch.no_grad():
        model(*model_args)
    h.remove()
    return block, seen["call"]


def key(module, args, kwargs=None, **kw):
    keys = key_of_module(module, *args, **(kwargs or {}), **kw)
    assert len(keys) == 1, f"expected one graph, got {len(keys)}"
    return keys[0][0]


def gpt2_block_key(layer=0, model=None, batch=1, seq=8, grad=False, **kw):
    model = model or zoo.gpt2(layers=max(2, layer + 1))
    block, (args, kwargs) = block_call(model, f"transformer.h.{layer}", zoo.ids(batch, seq))
    with torch.set_grad_enabled(grad):
        return key(block, args, kwargs, **kw)


def test_same_key_from_two_processes():
    code = ("import sys; sys.path.insert(0, 'tests'); sys.path.insert(0, 'tests/python/compile');"
            "import torch; torch.manual_seed(int(sys.argv[1]));"
            "from test_region_keys import gpt2_block_key; print(gpt2_block_key())")
    outs = [subprocess.run([PYTHON, "-c", code, str(seed)], capture_output=True, text=True,
                           cwd=REPO, env=python_env()) for seed in (1, 2)]
    for o in outs:
        assert o.returncode == 0, o.stderr[-2000:]
    a, b = (o.stdout.strip().splitlines()[-1] for o in outs)
    assert _core.is_key(a) and a == b


def test_same_key_for_different_weights_and_for_block_0_and_7():
    torch.manual_seed(0)
    m = zoo.gpt2(layers=8)
    k0, k7 = gpt2_block_key(0, m), gpt2_block_key(7, m)
    torch.manual_seed(1)
    assert k0 == k7 == gpt2_block_key(0, zoo.gpt2(layers=8))


def test_same_block_inside_two_different_models():
    from transformers import GPT2Model

    lm = zoo.gpt2(layers=2)
    base = GPT2Model(lm.config).eval()
    block, (args, kwargs) = block_call(base, "h.0", zoo.ids())
    with torch.no_grad():
        assert key(block, args, kwargs) == gpt2_block_key(0, lm)


def layer_keys(model, blocks: str) -> set[str]:
    keys = set()
    for i in range(len(model.get_submodule(blocks))):
        block, (args, kwargs) = block_call(model, f"{blocks}.{i}", zoo.ids())
        with torch.no_grad():
            keys.add(key(block, args, kwargs))
    return keys


def test_llama_and_bert_layers_key_alike_across_layers():
    assert len(layer_keys(zoo.llama(layers=3), "model.layers")) == 1
    assert len(layer_keys(zoo.bert(layers=2), "encoder.layer")) == 1


BASE = None


def base_key():
    global BASE
    if BASE is None:
        BASE = gpt2_block_key()
    return BASE


MUTATIONS = {
    "gelu approximation": lambda: gpt2_block_key(model=zoo.gpt2(activation_function="gelu")),
    "layernorm eps": lambda: gpt2_block_key(model=zoo.gpt2(layer_norm_epsilon=1e-6)),
    "width": lambda: gpt2_block_key(model=zoo.gpt2(hidden=64)),
    "head count": lambda: gpt2_block_key(model=zoo.gpt2(heads=4)),
    "sequence length": lambda: gpt2_block_key(seq=16),
    "batch size": lambda: gpt2_block_key(batch=2),
    "dtype": lambda: gpt2_block_key(model=zoo.gpt2().to(torch.bfloat16)),
    "training": lambda: gpt2_block_key(grad=True),
    "target": lambda: gpt2_block_key(target='{"device":"cpu","isa":"avx2"}'),
    "toolchain": lambda: gpt2_block_key(toolchain='{"torch":"2.13.1"}'),
    # A thread count no test process runs with by default.
    "env": lambda: gpt2_block_key(env='{"OMP_NUM_THREADS":"7"}'),
    "mode": lambda: gpt2_block_key(settings=CompileSettings(mode="max-autotune")),
    "fullgraph": lambda: gpt2_block_key(settings=CompileSettings(fullgraph=True)),
    "dynamic": lambda: gpt2_block_key(settings=CompileSettings(dynamic=False)),
    "options": lambda: gpt2_block_key(settings=CompileSettings(options={"max_autotune_gemm": True})),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_changes_the_key(name):
    assert MUTATIONS[name]() != base_key(), f"false hit: {name} did not change the key"


def test_autocast_changes_the_key():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert gpt2_block_key() != base_key()


def test_torch_version_string_changes_the_key(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.13.0+other")
    assert gpt2_block_key() != base_key()


def test_rope_theta_as_code_changes_the_key_and_as_data_does_not():
    x = torch.randn(1, 8, 16)
    with torch.no_grad():
        assert key(zoo.RopeBlock(theta=10000.0), (x,)) != key(zoo.RopeBlock(theta=500000.0), (x,))
    # In Llama the rotary table is computed outside the decoder layer and
    # passed in: theta is data there, and the layer's code is the same.
    a, (args_a, kw_a) = block_call(zoo.llama(rope_theta=10000.0), "model.layers.0", zoo.ids())
    b, (args_b, kw_b) = block_call(zoo.llama(rope_theta=500000.0), "model.layers.0", zoo.ids())
    with torch.no_grad():
        assert key(a, args_a, kw_a) == key(b, args_b, kw_b)


def test_buffers_are_data_not_code():
    x = torch.randn(2, 16)
    other = zoo.WithBuffer()
    other.scale.fill_(3.0)
    with torch.no_grad():
        assert key(zoo.WithBuffer(), (x,)) == key(other, (x,))


def test_device_index_is_not_in_the_key_and_nonzero_index_is_bypassed():
    """Faked devices: the fingerprint sees device types only; the backend
    refuses to cache a region on cuda:N, N != 0 (docs/keys.md)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kcache.traced.backend import _nonzero_device_index
    from kcache.keys.fingerprint import _tensor_desc

    with FakeTensorMode(allow_non_fake_inputs=True):
        t0 = torch.empty(2, 3, device="cuda:0")
        t1 = torch.empty(2, 3, device="cuda:1")
    assert _tensor_desc(t0) == _tensor_desc(t1)
    assert "cuda]" in _tensor_desc(t0) and ":1" not in _tensor_desc(t1)
    assert _nonzero_device_index([t0]) is None
    assert _nonzero_device_index([t1]) == "cuda:1"
    assert _nonzero_device_index([torch.empty(1)]) is None


GOLDEN_TARGET = '{"device":"cpu","isa":"avx2","march_native":"golden","threads":4}'
GOLDEN_TOOLCHAIN = '{"artifact":"kcache-bundle-v1","torch":"2.13.0"}'


def golden(module, x):
    with torch.no_grad():
        return key(module, (x,), target=GOLDEN_TARGET, toolchain=GOLDEN_TOOLCHAIN, env="{}")


def test_golden_keys():
    """Pinned keys, one set per supported torch release: they move only when
    kcache's key schema or that release's Dynamo graphs or Inductor config
    change — both deliberate, reviewed events. The sets differ between
    releases even with the toolchain field pinned (the graph and config
    fingerprints are the release's own), and all differ from each other."""
    torch.manual_seed(0)
    got = {
        "mlp": golden(zoo.MLP(), torch.randn(2, 16)),
        "with_buffer": golden(zoo.WithBuffer(), torch.randn(2, 16)),
        "rope": golden(zoo.RopeBlock(), torch.randn(1, 8, 16)),
    }
    every = json.loads((REPO / "tests" / "python" / "compile" / "golden_keys.json").read_text())
    assert set(every) == set(releases.SUPPORTED)
    assert got == every[releases.release_of(torch.__version__)], json.dumps(got, indent=1)
    # no key of one release is a key of another
    assert len({k for keys in every.values() for k in keys.values()}) == 3 * len(every)


def test_data_dependent_control_flow_gives_graph_pieces_not_a_crash():
    keys = key_of_module(zoo.DataDependent(), torch.randn(2, 16))
    assert len(keys) >= 2  # Dynamo breaks the graph at the branch; each piece keys alone


def test_a_forward_that_raises_raises_the_same_error():
    with pytest.raises(ValueError, match="this block is broken"):
        key_of_module(zoo.Raises(), torch.randn(2))


def test_config_hash_holds_no_paths():
    """Where torch is installed, where debug output goes and the compiler's
    path differ between checkouts and ranks: they must not split keys
    (found when golden keys differed between two clones)."""
    from kcache import _torch_adaptor as adaptor

    before = adaptor.config_fingerprint()
    with torch._dynamo.config.patch(base_dir="/elsewhere", debug_dir_root="/other/debug"), \
            torch._inductor.config.patch({"cpp.cxx": (None, "/opt/other/g++")}):
        assert adaptor.config_fingerprint() == before
    with torch._inductor.config.patch(max_autotune=True):
        assert adaptor.config_fingerprint() != before  # code-relevant entries still count


def test_ci_variable_does_not_split_keys():
    """CI runners set CI=1, which torch reads into a functorch config entry
    (error vs warning on custom-op aliasing): keys must not move with it."""
    code = ("import torch, json, sys; sys.path.insert(0, sys.argv[1]); import zoo; "
            "from kcache.keys.graph_key import key_of_module; torch.manual_seed(0); "
            "print(json.dumps(key_of_module(zoo.MLP(), torch.randn(2, 16))))")
    keys = []
    for ci in ("", "1"):
        env = {k: v for k, v in python_env().items() if k != "CI"}
        if ci:
            env["CI"] = ci
        out = run_job([PYTHON, "-c", code, str(REPO / "tests" / "models")], timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        keys.append(out.stdout.strip().splitlines()[-1])
    assert keys[0] == keys[1]
