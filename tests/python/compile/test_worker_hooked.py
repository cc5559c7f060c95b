"""A fully_shard-ed block (its hooks, its state, its class) reaches the
compile worker for its forward alone (kcache/precompiled/hooked.py, entry
"forward"): within its forward it has its own class back, the skeleton
leaves its hooks and fully_shard's state out, and the worker's block keys
and describes like the live one. Dynamo traces it as a plain module, every
guard kept (kcache/_torch_adaptor/fsdp.py)."""

from __future__ import annotations

import threading

import pytest
import torch

from background_job import build_model


def _as_fully_shard_leaves_it(block: torch.nn.Module) -> threading.Lock:
    """What fully_shard does to a block, but the sharding (which needs a
    process group): its class (PyTorch's own private function: this fails
    loudly if it drifts), Dynamo's marks on every module, state under a
    composable-API key, hooks; the state and hooks hold what does not
    pickle, as FSDPState's do."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard import _fsdp_init, _fully_shard

    _fsdp_init._apply_to_module((block,), {}, FSDPModule, "FSDP", _fully_shard._unimplemented_deepcopy)
    for m in block.modules():
        m._is_fsdp_managed_module = True
        m._fsdp_use_orig_params = True
    lock = threading.Lock()
    block.__dict__["__composable_api_state_key_test"] = {"state": lock}
    block.register_forward_hook(lambda mod, a, out, _lock=lock: out)
    block.register_state_dict_pre_hook(lambda *a, _lock=lock: None)
    block.ln_1.register_state_dict_pre_hook(lambda *a, _lock=lock: None)  # a submodule's
    return lock


def test_a_fully_shard_block_reaches_the_worker_for_its_forward():
    from kcache import _torch_adaptor as adaptor
    from kcache.background import skeleton
    from kcache.keys import block_key
    from kcache.keys.fields import CompileSettings
    from kcache.precompiled import entries, hooked

    torch.manual_seed(0)
    block = build_model("gpt2", 1, 64).transformer.h[0]
    plain_cls = type(block)
    _as_fully_shard_leaves_it(block)
    fsdp_cls = type(block)
    assert fsdp_cls.__name__ == "FSDPGPT2Block" and adaptor.plain_class(fsdp_cls) is plain_cls
    assert adaptor.plain_class(plain_cls) is plain_cls
    captured = {}

    def grab(mod, args, kwargs):
        captured["call"] = (args, kwargs)

    block.register_forward_pre_hook(grab, with_kwargs=True)
    x = torch.randn(2, 8, 64)
    with torch.no_grad():
        want = block(x)
    args, kwargs = captured["call"]

    # The whole call cannot go: fully_shard's class refuses deepcopy, its
    # hooks do not pickle.
    with pytest.raises(skeleton.NotReproducible):
        skeleton.describe(block, args, kwargs, "call")

    settings = CompileSettings(backend="inductor", mode=None, fullgraph=False, dynamic=None, options={})
    with hooked.own_class(block):
        assert type(block) is plain_cls
        data = skeleton.describe(block, args, kwargs, "forward")
        live = block_key.region_fields(block, args, kwargs, settings, entry="forward", entry_source="x")
    assert type(block) is fsdp_cls  # given back
    rebuilt, rargs, rkwargs, context = skeleton.rebuild(data)
    assert type(rebuilt) is plain_cls and context["classes_differ"] == []
    assert not rebuilt._forward_pre_hooks and not rebuilt._forward_hooks
    assert not rebuilt._state_dict_pre_hooks and not rebuilt.ln_1._state_dict_pre_hooks
    assert rebuilt.__dict__["__composable_api_state_key_test"] == {}
    assert block._forward_pre_hooks and block._forward_hooks and block.ln_1._state_dict_pre_hooks  # kept
    with skeleton.applied(context):
        assert block_key.region_fields(rebuilt, rargs, rkwargs, settings, entry="forward",
                                       entry_source="x") == live
    rebuilt.load_state_dict(block.state_dict())
    with torch.no_grad():
        assert torch.equal(entries.forward(rebuilt, x, **rkwargs)[0], want[0])

    # Traced as a plain module: the marks off while Dynamo traces, back after.
    with adaptor.traced_as_plain(block):
        assert not any(m._is_fsdp_managed_module for m in block.modules())
    assert all(m._is_fsdp_managed_module is True for m in block.modules())
