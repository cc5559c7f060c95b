"""Inductor's build of one CPU kernel library, with a hook around it.

Inductor builds a CPU kernel's shared library in
torch._inductor.codecache._worker_compile_cpp(lock_path, cpp_builders):
under the kernel's file lock, each builder whose target is missing runs
the host compiler, and the last builder's target is the library
CppCodeCache.load_async loads. The library's file name is Inductor's key
for the kernel, a hash of the kernel's source and of the compile command
line (flags, vector ISA, include paths). load_async reaches the function
through the code cache module's global, per kernel, in the calling
process: its compile threads are threads, so a hook set here sees every
kernel library the process builds. (The precompiled header goes through
the same function; its target is not a library and is left alone.)

kcache's compile worker shares these libraries between processes
(kcache/background/shared_kernels.py). tests/python/compile/test_torch_adaptor.py
fails loudly when the function or its call from load_async drifts.
"""

from __future__ import annotations

import inspect
import os
from typing import Callable

# around(target_path, build) builds the library at target_path, calling
# build() (the host compiler, under Inductor's lock) or not.
Around = Callable[[str, Callable[[], None]], None]


def library_build_hook_available() -> bool:
    """Whether this torch builds kernel libraries where the hook expects."""
    from torch._inductor import codecache

    real = getattr(codecache, "_worker_compile_cpp", None)
    if real is None or not callable(real):
        return False
    real = getattr(real, "__wrapped__", real)
    return list(inspect.signature(real).parameters) == ["lock_path", "cpp_builders"] and \
        "_worker_compile_cpp" in inspect.getsource(codecache.CppCodeCache.load_async)


def hook_library_builds(around: Around) -> Callable[[], None]:
    """Routes every kernel library build of this process through
    `around(target, build)` until the returned function is called. A build
    whose library is already there, and one that is not a library (the
    precompiled header), runs as before."""
    from torch._inductor import codecache

    real = codecache._worker_compile_cpp

    def hooked(lock_path, cpp_builders):
        target = str(cpp_builders[-1].get_target_file_path())
        if not target.endswith(".so") or os.path.exists(target):
            return real(lock_path, cpp_builders)
        return around(target, lambda: real(lock_path, cpp_builders))

    hooked.__wrapped__ = real
    codecache._worker_compile_cpp = hooked

    def undo() -> None:
        codecache._worker_compile_cpp = real

    return undo
