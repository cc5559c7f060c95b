"""Dict version tags, read through PyTorch's own guard helper.

CPython gives every dict a version tag that changes on every write
(`ma_version_tag`); Dynamo's DICT_VERSION guards read it through
`torch._C._dynamo.guards.dict_version`. kcache.guards.call_watch compares the
tags of the dicts a precompiled block's checks read, on every call, to see
a change after the first call at the cost of one C call per dict.
"""

from __future__ import annotations

from torch._C._dynamo import guards as _guards

dict_version = _guards.dict_version


def required() -> dict[str, bool]:
    return {"torch._C._dynamo.guards.dict_version": callable(getattr(_guards, "dict_version", None))}
