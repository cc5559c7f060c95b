"""One region's compile recorded (Mega-Cache bytes and the C++ libraries
it loads) and put back in a fresh process."""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Iterator

import torch

from .inductor import inductor_cache_dir


class Capture:
    """What one region's compile produced: Mega-Cache bytes and binaries."""

    def __init__(self) -> None:
        self.mega_cache: bytes = b""
        self.binaries: dict[str, bytes] = {}  # cache-dir-relative path -> bytes
        self.torch_keys: dict[str, list[str]] = {}


def _clear_cpp_memory_caches() -> None:
    from torch._inductor import codecache

    for cls in (codecache.CppCodeCache, codecache.CppPythonBindingsCodeCache,
                codecache.CppWrapperCodeCache):
        cls.cache.clear()


@contextlib.contextmanager
def record_loaded_libraries() -> Iterator[list[str]]:
    """Notes, as cache-dir-relative paths, every compiled C++ library
    Inductor loads inside the block (clearing its in-process library caches
    first, so a library already loaded is loaded — and noted — again)."""
    from torch._inductor import codecache

    loaded: list[str] = []
    original = codecache.CppCodeCache._load_library.__func__

    def recording_load(cls, path, key):
        loaded.append(path)
        return original(cls, path, key)

    _clear_cpp_memory_caches()
    codecache.CppCodeCache._load_library = classmethod(recording_load)
    relative: list[str] = []
    try:
        yield relative
    finally:
        codecache.CppCodeCache._load_library = classmethod(original)
        root = inductor_cache_dir().resolve()
        for path in dict.fromkeys(loaded):
            p = pathlib.Path(path).resolve()
            try:
                relative.append(str(p.relative_to(root)))
            except ValueError:
                continue  # outside the cache dir: not produced by this compile


@contextlib.contextmanager
def capture_region() -> Iterator[Capture]:
    """Records everything one region's compile produces.

    Inside the block, every PyTorch cache artifact created goes to a fresh
    Mega-Cache recording, and every compiled C++ library loaded is noted.
    In-process caches of compiled libraries are cleared first, so a kernel
    this region shares with an earlier one is loaded (and so recorded) again
    rather than silently reused.
    """
    from torch.compiler._cache import CacheArtifactManager

    cap = Capture()
    with record_loaded_libraries() as libraries:
        with CacheArtifactManager.with_fresh_cache():
            yield cap
            result = torch.compiler.save_cache_artifacts()
        if result is not None:
            cap.mega_cache, info = result
            cap.torch_keys = {k: list(v) for k, v in info.artifacts.items()}
    root = inductor_cache_dir()
    for rel in libraries:
        cap.binaries[rel] = (root / rel).read_bytes()


def restore_region(mega_cache: bytes, binaries: dict[str, bytes]) -> None:
    """Puts a captured region back where PyTorch will find it.

    Binaries go first, at their cache-dir-relative paths (named by a hash of
    their source and flags, so identical kernels land on identical names), via
    a temp file and rename so a concurrent reader never sees a partial file.
    Then the Mega-Cache bytes populate the FX-graph and AOTAutograd caches.
    """
    root = inductor_cache_dir().resolve()
    for rel, data in binaries.items():
        dest = (root / rel).resolve()
        if root not in dest.parents:
            raise ValueError(f"bundle binary path escapes the cache dir: {rel!r}")
        if dest.exists() and dest.read_bytes() == data:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
    if mega_cache:
        torch.compiler.load_cache_artifacts(mega_cache)
