"""Blocks with hooks of their own: the hooks run eagerly, the forward
precompiled.

fully_shard (FSDP2) registers a forward pre-hook and a forward hook on
every block it shards (all-gather before the forward, reshard after); a
job may add its own. kcache's usual entries compile the block's call with
its hooks inlined (kcache.precompiled.entries `call`, `call_impl`), and
PyTorch keeps no guard on hooks, so such a block used to take the traced
path. Now a block whose only hooks are its own runs them as eager PyTorch
does (`nn.Module._call_impl`), around its class's forward precompiled as a
region of its own (entry `forward`, PrecompiledRegion.forward_region). The
hooks are not in that function, so they may come, go and change.

Inside FSDP2's forward the block's parameters are plain unsharded tensors:
one region for every rank and world size, and a compile worker (background
mode) rebuilds the block without its hooks or its sharding
(kcache.background.skeleton). For the length of its forward a
fully_shard-ed block is given back its own class (not fully_shard's
`FSDP<Block>`, which Dynamo's guards cannot load in another process:
kcache/_torch_adaptor/fsdp.py), so its region is compiled, keyed and
checked as that class.

The precompiled forward is put where `_call_impl` looks for it, the
block's `forward` instance attribute, from the call's start until
`_call_impl` has read it (before the hooks run). A block
takes the traced path instead (hooks and all, compiled by Dynamo) when a
submodule has hooks or global hooks are set (they run inside the forward),
when the block already has a `forward` instance attribute, or once its
forward could not be precompiled (that call's forward runs eagerly: its
hooks have run already).
"""

from __future__ import annotations

import contextlib

from kcache import _torch_adaptor as adaptor

from . import entries

TRACED = object()  # what a forward region returns for a block it cannot run


def traced_reason(block, slots: dict, hooks: list[str]) -> str | None:
    """Why this hooked block takes the traced path; None: its hooks run
    eagerly around its precompiled forward."""
    if slots.get("hooked"):
        return slots["hooked"]
    inside = [h for h in hooks if "." in h or h.startswith("_global")]
    if inside:
        return "the block has module hooks that run inside its forward (" + ", ".join(inside) + ")"
    if "forward" in block.__dict__:
        return "the block has hooks and a forward instance attribute of its own"
    return None


@contextlib.contextmanager
def own_class(block):
    """The block as an instance of its own class, not fully_shard's
    `FSDP<Block>` (kcache/_torch_adaptor/fsdp.py), until the end."""
    cls = type(block)
    plain = adaptor.plain_class(cls)
    if plain is cls:
        yield
        return
    block.__class__ = plain
    try:
        yield
    finally:
        block.__class__ = cls


def call(region, block, slots: dict, args: tuple, kwargs: dict):
    """One call of a block whose hooks are its own: `_call_impl` runs them
    and, for the forward, the block's forward region."""
    forwards = region.forward_region()
    own = slots.get("forward")
    if own is None:
        own = slots["forward"] = {"ready": {}}

    def forward(*a, **k):
        # `_call_impl` has read it: gone before the forward runs (a compile
        # pickles the block's state, and this holds the cache client)
        block.__dict__.pop("forward", None)
        with own_class(block):
            out = forwards.run_plain(block, own, a, k)
            if out is TRACED:
                slots["hooked"] = "the block has hooks and its forward could not be precompiled"
                return entries.forward(block, *a, **k)
            return out

    block.__dict__["forward"] = forward
    try:
        return block._call_impl(*args, **kwargs)
    finally:
        block.__dict__.pop("forward", None)
