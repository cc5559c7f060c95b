"""A fully_shard-ed block's own class, and Dynamo's view of the modules
fully_shard manages.

fully_shard (FSDP2) turns each module it shards into an instance of a
class it makes at run time, `FSDP<Block>`: FSDPModule first, the block's
class after it (at `_orig_cls_mro_index`). Dynamo's guard serialization
loads such a module as an instance of the block's class
(torch/_dynamo/package.py `load_guards_state`: FSDPModule.__new__ makes
the original class), so a function compiled on an `FSDP<Block>` fails its
own type guards in any other process. kcache therefore compiles and runs a
fully_shard-ed block's forward with the block's class set to its own
(kcache/precompiled/hooked.py): FSDPModule only adds methods the forward
does not call, and FSDP's hooks run outside it.

Read only where FSDP is imported already (a module fully_shard changed
imported it), so that importing kcache never imports FSDP; a drift fails
tests/python/compile/test_worker_hooked.py.
"""

from __future__ import annotations

import contextlib
import sys

_MODULE = "torch.distributed.fsdp._fully_shard._fully_shard"


def plain_class(cls: type) -> type:
    """The block's own class under fully_shard's `FSDP<Block>`; `cls` for
    any other class."""
    fully_shard = sys.modules.get(_MODULE)
    if fully_shard is None or not issubclass(cls, fully_shard.FSDPModule) or cls is fully_shard.FSDPModule:
        return cls
    return cls.__mro__[getattr(cls, "_orig_cls_mro_index", 2)]


@contextlib.contextmanager
def traced_as_plain(block):
    """Dynamo treats a module marked `_is_fsdp_managed_module` (fully_shard
    marks every module it manages) as FSDP's and keeps no guard on what it
    reads from it (torch._dynamo.config.skip_fsdp_guards). A stored region
    must check everything it was compiled with, in any process, so kcache
    traces a block with the marks cleared, as a plain module's; they are
    put back after (they do not change what runs: the guards read the
    modules themselves)."""
    managed = [m for m in block.modules() if m.__dict__.get("_is_fsdp_managed_module") is True]
    for m in managed:
        m.__dict__["_is_fsdp_managed_module"] = False
    try:
        yield
    finally:
        for m in managed:
            m.__dict__["_is_fsdp_managed_module"] = True
