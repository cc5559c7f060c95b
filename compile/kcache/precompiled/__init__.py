"""The precompiled path: warm starts that skip Dynamo (docs/precompiled.md).

Read in the order a block travels: block (the module compile_regions puts
in the model) -> region (every call: the function for a call signature,
watched afterwards) -> variants (the region's index and variants, fetched or
compiled under a lease) -> build (compile, pack, load one variant) ->
checks (the portable checks a loaded variant must pass on the live block).
in_place installs the same for blocks compiled in place; entries holds the
functions Dynamo compiles; spec the call signature.
"""

from .block import PrecompiledBlock
from .entries import call, call_impl
from .region import PrecompiledRegion

__all__ = ["PrecompiledBlock", "PrecompiledRegion", "call", "call_impl"]
