"""The functions Dynamo compiles ahead of time for precompiled regions.

Every block of a region runs through one of them with the block passed as
an argument, so that one trace serves every identical block. They live in
a file of their own: a stored function's guards check this file's source
(Dynamo's inlined-source checksums), so it changes only when they do.
"""

from __future__ import annotations

import functools
import hashlib
import inspect


def call(block, *args, **kwargs):
    """The function Dynamo compiles for every precompiled region."""
    return block(*args, **kwargs)


def call_impl(block, *args, **kwargs):
    """The function Dynamo compiles for blocks compiled in place
    (kcache.precompiled.in_place): what nn.Module.compile() compiles."""
    return block._call_impl(*args, **kwargs)


def forward(block, *args, **kwargs):
    """The function Dynamo compiles for blocks with hooks of their own
    (fully_shard's, a job's): the block's class's forward, without the
    block's hooks, which run eagerly around it (kcache/precompiled/hooked.py)."""
    return type(block).forward(block, *args, **kwargs)


ENTRIES = {"call": call, "call_impl": call_impl, "forward": forward}


@functools.lru_cache(maxsize=None)
def source_digest(name: str) -> str:
    """The entry's module, first line and source, hashed: what Dynamo's
    inlined-source check of a stored function compares (a field of the
    precompiled key, kcache.keys.block_key.region_fields)."""
    fn = ENTRIES[name]
    text = f"{fn.__module__}\0{fn.__code__.co_firstlineno}\0{inspect.getsource(fn)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]
# The globals a deserialized function runs with: this module's.
F_GLOBALS = globals()
