"""Every KCACHE_* variable the Python side reads, declared once.

Each setting has a type, a default and one line of documentation; they are
read through `get(name)` (or the named helpers below) and parsed by the same
rules as the C++ client (client/config.cpp): a boolean is empty, 0, false,
no or off for false and 1, true, yes or on for true, case and surrounding
whitespace ignored, and anything else is an error naming the variable; text
is trimmed. tests/python/compile/test_settings.py checks that both sides
agree on every variable they share, and docs/client.md's "Python settings"
table is generated from SETTINGS (`python -m kcache.settings --markdown`).

The C++ client reads its own variables (KCACHE_TOKEN, timeouts, TLS files…;
docs/client.md); `kcache.configure()` hands it overrides as an environment
of its own, never by writing os.environ.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Mapping


class SettingError(ValueError):
    """A KCACHE_* variable whose value does not parse."""


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # "bool", "int" or "text"
    default: bool | int | str
    doc: str
    shared: bool = False  # the C++ client reads it too (the agreement test covers it)


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("KCACHE_URL", "text", "",
            "the kcache-server URL; unset: this node's tier only (the C++ client's setting; "
            "`python -m kcache.prewarm` needs it or `--server`)", shared=True),
    Setting("KCACHE_LOCAL_DIR", "text", "",
            "the node tier; kcache also keeps its per-node facts there (ISA probe verdicts, "
            "`-march=native`); `none`: no node tier", shared=True),
    Setting("KCACHE_TARGET", "text", "",
            "overrides the key's target field (a GPU arch `cuda:sm_90`, or any label): "
            "prewarming for another host", shared=True),
    Setting("KCACHE_DISABLE", "bool", False,
            "kcache off: torch.compile runs unchanged, and the C++ client caches nothing", shared=True),
    Setting("KCACHE_PRECOMPILED", "bool", True,
            "repeated blocks take the precompiled path (no Dynamo trace on a warm start); "
            "0: every region takes the traced path (docs/compile.md)"),
    Setting("KCACHE_VERIFY_FIRST_USE", "bool", False,
            "compare each restored region's first call with eager, forward and backward; "
            "a mismatch refuses it (docs/precompiled.md)"),
    Setting("KCACHE_COLD_START", "text", "",
            "`background`: a block whose region is not stored yet runs eagerly while a compile worker "
            "process builds it, and switches when it lands; `wait`: the block compiles (or waits on "
            "the rank compiling it) in its first call; unset: `background` when a server URL is "
            "set and the worker has cores the training leaves free (blocks on a GPU, spare CPU cores or "
            "KCACHE_WORKER_CPUS), else `wait` (docs/cold-start.md)"),
    Setting("KCACHE_WORKER_CPUS", "text", "",
            "CPUs for the compile worker (a list such as `1` or `2-15,17`): it is pinned to them, and "
            "a CPU job whose worker has cores of its own keeps the background mode (docs/cold-start.md)"),
    Setting("KCACHE_WORKER_PRIORITY", "text", "normal",
            "`normal`, or `idle`: the compile worker runs only on cores the training leaves idle "
            "(SCHED_IDLE)"),
    Setting("KCACHE_WORKER_MAX_RSS_MB", "int", 16384,
            "the compile worker's memory bound: a worker above it is stopped and the region it was "
            "compiling stays eager until another process stores it (docs/cold-start.md)"),
    Setting("KCACHE_WORKER_DEADLINE_S", "int", 1800,
            "the longest one region's compile may take in the worker before it is stopped; the "
            "region stays eager until another process stores it"),
    Setting("KCACHE_SHARE_KERNELS", "bool", True,
            "compile workers build each CPU kernel library through the store, so that a kernel two "
            "regions share is built once cluster-wide (docs/cold-start.md)"),
    Setting("KCACHE_ALLOW_UNTESTED_TORCH", "bool", False,
            "use every path on a torch outside the supported releases (docs/torch-support.md)"),
)}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def parse_bool(name: str, value: str) -> bool:
    """The C++ client's parse_bool (client/config.cpp), same words, same error."""
    s = value.strip().lower()
    if s in _FALSE:
        return False
    if s in _TRUE:
        return True
    raise SettingError(f"{name} must be 0/1/true/false, not '{value}'")


def get(name: str, environ: Mapping[str, str] | None = None) -> bool | str:
    """The value of a declared setting: parsed, or its default when unset.
    Raises SettingError for a malformed value, KeyError for an undeclared name."""
    setting = SETTINGS[name]
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None:
        return setting.default
    if setting.kind == "bool":
        return parse_bool(name, raw)
    if setting.kind == "int":
        try:
            value = int(raw.strip())
        except ValueError:
            value = -1
        if value <= 0:
            raise SettingError(f"{name} must be a positive whole number, not '{raw}'")
        return value
    return raw.strip()


def enabled(name: str) -> bool:
    """A boolean setting, its default when the value does not parse (the
    switches of the compile path must never stop a job; the C++ client,
    which reads KCACHE_DISABLE too, reports the malformed value)."""
    try:
        return bool(get(name))
    except SettingError:
        return bool(SETTINGS[name].default)


def number(name: str) -> int:
    """A whole-number setting, its default when the value does not parse
    (said once: a bound of the compile path must never stop a job)."""
    try:
        return int(get(name))
    except SettingError as e:
        if name not in _said:
            _said.add(name)
            logging.getLogger("kcache").warning("kcache: %s; using %s", e, SETTINGS[name].default)
        return int(SETTINGS[name].default)


_said: set[str] = set()


def kcache_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The KCACHE_* entries of an environment (what another process of the
    job needs to build the same client)."""
    return {k: v for k, v in environ.items() if k.startswith("KCACHE_")}


def markdown() -> str:
    """docs/client.md's table of the Python side's settings."""
    rows = ["| Variable | Type | Default | Meaning |", "|---|---|---|---|"]
    for s in SETTINGS.values():
        default = ("1" if s.default else "0") if s.kind == "bool" else (s.default or "unset")
        default = str(default)
        shared = " Read by the C++ client too." if s.shared else ""
        rows.append(f"| `{s.name}` | {s.kind} | `{default}` | {s.doc}.{shared} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--markdown"]:
        raise SystemExit("usage: python -m kcache.settings --markdown")
    sys.stdout.write(markdown())
