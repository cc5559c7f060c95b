"""Kernels PyTorch rebuilt after a restore: counted and said, never hidden."""

from __future__ import annotations

import logging

from kcache.state import counters

log = logging.getLogger("kcache")


def report(key: str, missing: set[str]) -> None:
    """A restored region that still built C++ libraries of its own.

    Inductor names each library by a hash that includes its compile command,
    absolute include paths among them: a rank whose torch lives at another
    path looks for other names, misses the restored binaries and runs the
    host compiler.
    """
    if not missing:
        return
    counters.bump(binary_misses=len(missing))
    log.warning("kcache: region %s restored, but PyTorch built %d kernel librar%s itself (%s); "
                "is torch installed at a different path than where the bundle was made? "
                "Inductor's library names hash absolute include paths.",
                key[:12], len(missing), "y" if len(missing) == 1 else "ies", sorted(missing)[0])
