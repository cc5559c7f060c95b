"""The process's cache client (kcache._core.Client), built once from the
KCACHE_* environment or by kcache.configure()."""

from __future__ import annotations

import os
from typing import Any

from kcache import _core

_store = None
_environ: dict[str, str] | None = None  # what _store was built from (None: options in code)


def configure(url: str | None = None, local_dir: str | None = None, **client_options: Any) -> None:
    """Configures the cache client in code.

    With only `url` and/or `local_dir`, every other KCACHE_* setting (token,
    TLS files, trusted and signing keys, target, timeouts …) still applies:
    the two arguments override KCACHE_URL / KCACHE_LOCAL_DIR ("none" turns
    the node tier off) in the environment the client reads, which is a copy:
    os.environ is left as it was. With any other option the client is built
    from the arguments alone (url and local_dir falling back to KCACHE_URL
    and KCACHE_LOCAL_DIR). Without a URL (and without KCACHE_URL) regions are
    cached on this node only. Options are those of kcache._core.Client
    (docs/client.md).
    """
    global _store, _environ
    if not client_options:
        environ = dict(os.environ)
        environ.update({k: v for k, v in (("KCACHE_URL", url), ("KCACHE_LOCAL_DIR", local_dir))
                        if v is not None})
        _store = _core.Client.from_env(environ)
        _environ = environ
        return
    _environ = None
    env = _core.Client.from_env().config
    _store = _core.Client(url=url if url is not None else (env.get("url") or None),
                          local_dir=local_dir or env.get("local_dir"), **client_options)


def get_store():
    """The client, configured from the environment on first use."""
    if _store is None:
        configure()
    return _store


def environment() -> dict[str, str] | None:
    """The environment the client was built from, for a process
    that must build the same client (a compile worker); None when it was
    built from options in code, which another process cannot repeat."""
    get_store()
    return None if _environ is None else dict(_environ)


def current():
    """The client if one was made, else None (nothing is configured)."""
    return _store
