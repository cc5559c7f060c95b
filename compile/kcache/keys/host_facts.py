"""Facts about this host that cost a process to find, found once per node.

kcache's key needs what `-march=native` resolves to (a host-compiler run,
~0.1 s, in every process that computes a key), and Inductor checks every
candidate vector ISA by loading a probe library in a child Python (~0.4 s,
kcache.artifacts.isa_probes). The answers depend only on the compiler binary, the
CPU (and, for the ISA checks, the torch build), so they are kept in the node tier directory
(`<local dir>/host/<fact>-<digest of its inputs>.json`) and recomputed
whenever the compiler binary (path, size, mtime) or the CPU's feature
flags change. No node tier (KCACHE_LOCAL_DIR=none, or neither
XDG_CACHE_HOME nor HOME set): computed every time, never cached in a
shared place. A directory not owned by this user, or writable by others,
is not trusted: the fact is computed instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import stat
from collections.abc import Callable

from kcache import settings


def node_dir() -> pathlib.Path | None:
    """The node tier directory as the client resolves it (docs/client.md)."""
    local = settings.get("KCACHE_LOCAL_DIR")
    if local in ("none", "off"):
        return None
    if local:
        return pathlib.Path(local)
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(os.environ["HOME"], ".cache") if os.environ.get("HOME") else None)
    return pathlib.Path(base, "kcache") if base else None


def _trusted(path: pathlib.Path) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def cpu_flags() -> str:
    """A digest of the CPU feature flags the kernel reports."""
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    flags = sorted({l for l in lines if l.startswith(("flags", "Features"))})
    return hashlib.sha256("\n".join(flags).encode()).hexdigest()[:16]


def compiler_stamp(cxx: str) -> dict:
    """What identifies a compiler binary without running it."""
    path = shutil.which(cxx) or cxx
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        return {"path": real, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    except OSError:
        return {"path": path, "size": None, "mtime_ns": None}


def _fact_path(root: pathlib.Path, fact: str, inputs: dict) -> pathlib.Path:
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]
    return root / "host" / f"{fact}-{digest}.json"


# Answers given to this process from elsewhere (the server's record for
# this machine type, kcache.artifacts.machine_facts), by fact and inputs.
_seeded: dict[tuple[str, str], str] = {}


def seed(fact: str, inputs: dict, value: str) -> None:
    """An answer checked elsewhere: used by this process and stored for the node."""
    _seeded[(fact, json.dumps(inputs, sort_keys=True))] = value
    remember(fact, inputs, value)


def lookup(fact: str, inputs: dict) -> str | None:
    """The answer seeded in this process or stored on this node for these
    inputs, or None."""
    seeded = _seeded.get((fact, json.dumps(inputs, sort_keys=True)))
    if seeded is not None:
        return seeded
    root = node_dir()
    if root is None:
        return None
    path = _fact_path(root, fact, inputs)
    if not (_trusted(root) and _trusted(path.parent)):
        return None
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(stored, dict) and stored.get("inputs") == inputs \
            and isinstance(stored.get("value"), str):
        return stored["value"]
    return None


def remember(fact: str, inputs: dict, value: str) -> None:
    """Stores an answer for the node; a read-only or full disk, or an
    untrusted directory, stores nothing (the next process asks again)."""
    root = node_dir()
    if root is None:
        return
    path = _fact_path(root, fact, inputs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if _trusted(root) and _trusted(path.parent):
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"inputs": inputs, "value": value}))
            os.replace(tmp, path)
    except OSError:
        pass


def cached(fact: str, inputs: dict, compute: Callable[[], str],
           keep: Callable[[str], bool] = lambda value: True) -> str:
    """`compute()` once per node for these inputs; the stored answer after.
    An answer `keep` refuses (a failed query) is returned, not stored."""
    stored = lookup(fact, inputs)
    if stored is not None:
        return stored
    value = compute()
    if keep(value):
        remember(fact, inputs, value)
    return value
