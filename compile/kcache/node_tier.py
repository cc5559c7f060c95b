"""The node-local tier: verified bundles in a directory every rank of a node shares.

Objects live at <dir>/objects/<2 hex>/<key>; a write goes to a temp file in
the same directory, is fsynced and renamed into place only if absent (first
writer wins), so a reader never sees a partial object. Readers verify every
bundle (bundle_io.unpack) so a corrupt file costs a compile, never a crash.

This is the interim Python tier of the thin path; the C++ client (client/)
takes it over with the same layout.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

from . import _core


class NodeTier:
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = pathlib.Path(root)

    def _path(self, key: str) -> pathlib.Path:
        if not _core.is_key(key):
            raise ValueError(f"not a cache key: {key!r}")
        return self.root / "objects" / key[:2] / key

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes) -> bool:
        """Stores `data` unless present; True if this call published it."""
        dest = self._path(key)
        if dest.exists():
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, dest)  # fails if present: first writer wins
            except FileExistsError:
                return False
            return True
        finally:
            os.unlink(tmp)

    def remove(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)
