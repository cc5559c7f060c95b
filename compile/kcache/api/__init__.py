"""The public entry: what a training job calls.

regional (compile_regions, compile_regions_in_place, compile) -> compiler
(which path each block takes) -> kcache.precompiled or kcache.traced.
report says what happened; regions finds the repeated blocks; configure
sets up the cache client (kcache.state.store).
"""

from kcache.state.store import configure

from .regional import compile, compile_regions, compile_regions_in_place
from .regions import find_regions, region_report
from .report import last_keys, region_outcomes, stats

__all__ = ["compile", "compile_regions", "compile_regions_in_place", "configure", "find_regions",
           "last_keys", "region_outcomes", "region_report", "stats"]
