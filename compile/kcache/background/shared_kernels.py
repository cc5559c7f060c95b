"""Kernel libraries shared between compile workers (docs/cold-start.md,
"Kernels two regions share").

Two regions can contain the same kernel: Inductor generates the same C++
for both, and names its library by the same hash. Compiled in one process
the library is built once; compiled by the workers of two ranks at once,
each built it (bench/coldstart/background_n2_cxx.log: one g++ build more
cluster-wide than one rank's at N = 4 and 8). So a compile worker builds
each kernel library through the store, as one more entry:

- its key's region field is `kcache:cpp-kernel-v1:<library name>` (the
  name is Inductor's hash of the kernel's source and command line), and
  its target, toolchain (torch build, compiler identity) and environment
  fields are the regions' own: a library is shared only between processes
  that would have built it from the same inputs with the same compiler;
- single flight as for regions: one process builds it under the entry's
  lease and uploads it; a worker that needs it meanwhile waits for the
  landing (a worker waits off the training thread; a library build never
  waits on anything, so waits cannot form a cycle);
- what is uploaded is what this process's compiler just built; a fetched
  bundle is verified by the client (framing, digest, key, signature when
  required) and must then hold exactly that library, an ELF file, or it is
  refused: said once, counted, and the library is built here;
- any store failure (no server, an error) builds the library here, as
  without kcache.

Only the compile worker shares libraries (the rank's own compiles are the
wait path's, serialized by region leases). `KCACHE_SHARE_KERNELS=0` turns
it off.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from kcache import _torch_adaptor as adaptor
from kcache.artifacts import bundle_io
from kcache.keys import fields as keyfields
from kcache.keys.env_table import env_field
from kcache.keys.make import key_of

log = logging.getLogger("kcache")

REGION = "kcache:cpp-kernel-v1"
ELF = b"\x7fELF"


def kernel_key(name: str) -> tuple[str, str]:
    """(key, explanation) of the kernel library `name` on this machine."""
    fields = {"region": f"{REGION}:{name}", "dtype": "-", "target": keyfields.target_field("cpu"),
              "mode": "-", "toolchain": keyfields.toolchain_field(), "env": env_field()}
    # Mode "kernel" in the label: the server's stats and metrics by mode
    # tell kernel libraries from regions.
    return key_of(fields, f"cpp-kernel/{keyfields.short_target('cpu')}/-/kernel/-")


def refusal(bundle: bundle_io.Restorable, name: str) -> str | None:
    """Why a fetched kernel bundle may not be installed, or None."""
    if sorted(bundle.binaries) != [name]:
        return f"it holds {sorted(bundle.binaries)[:3]}, not exactly {name}"
    if not bundle.binaries[name].startswith(ELF):
        return "its library is not an ELF file"
    return None


def _install(target: str, data: bytes) -> None:
    """Writes a library where Inductor looks for it, atomically."""
    tmp = f"{target}.kcache-{os.getpid()}-{threading.get_ident()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)


class SharedKernels:
    """around(target, build) for adaptor.hook_library_builds, through `client`."""

    def __init__(self, client) -> None:
        self.client = client
        self.lock = threading.Lock()
        self.built = 0  # libraries this process's compiler built (and uploaded)
        self.fetched = 0  # libraries another process built, installed here
        self.refused = 0  # fetched bundles refused (built here instead)
        self.build_seconds = 0.0  # wall time in builds: inside the regions' compile seconds
        self._said: set[str] = set()

    def _count(self, **kw) -> None:
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def _say_once(self, what: str, message: str, *args) -> None:
        if what not in self._said:
            self._said.add(what)
            log.warning(message, *args)

    def __call__(self, target: str, build) -> None:
        name = os.path.basename(target)
        key, explanation = kernel_key(name)
        state: dict[str, bool] = {}

        def produce() -> bytes:
            t0 = time.monotonic()
            try:
                build()
            except BaseException:
                state["failed"] = True  # the compiler's error: it reaches Inductor unchanged
                raise
            finally:
                seconds = time.monotonic() - t0
                self._count(build_seconds=seconds)
            state["built"] = True
            self._count(built=1)
            with open(target, "rb") as f:
                data = f.read()
            # Its build seconds in the manifest: `kcache evict --order value`
            # weighs what a library saves like any region's compile.
            return bundle_io.pack_precompiled(key, explanation, binaries={name: data}, compile_seconds=seconds,
                                              extra={"kernel": {"library": name}})

        try:
            data, _source = self.client.get_or_compile(key, produce, explanation)
        except Exception as e:  # noqa: BLE001 - the compiler's error, or the store's
            if state.get("failed"):
                raise
            if not state.get("built"):
                self._say_once("store", "kcache: kernel libraries are not shared (%s: %s); "
                                        "this worker builds them itself", type(e).__name__, e)
                build()
            return
        if state.get("built"):
            return
        try:
            bundle = bundle_io.unpack(data, key)
            why = refusal(bundle, name)
        except Exception as e:  # noqa: BLE001 - an unreadable bundle is refused like a wrong one
            bundle, why = None, f"it does not open ({type(e).__name__}: {e})"
        if why is not None:
            self._count(refused=1)
            self._say_once(key, "kcache: kernel library %s (%s) refused: %s; built here",
                           name, key[:12], why)
            self.client.drop_node_copy(key)
            build()
            return
        _install(target, bundle.binaries[name])
        self._count(fetched=1)

    def totals(self) -> dict:
        with self.lock:
            return {"built": self.built, "fetched": self.fetched, "refused": self.refused,
                    "build_seconds": round(self.build_seconds, 3)}


def share(client) -> SharedKernels | None:
    """Installs library sharing in this process (the compile worker); None
    when this torch does not build libraries where the hook expects (said
    once: the worker then builds every library itself)."""
    if not adaptor.library_build_hook_available():
        log.warning("kcache: this torch builds kernel libraries elsewhere than kcache's hook "
                    "expects; kernel libraries are not shared between compile workers")
        return None
    shared = SharedKernels(client)
    adaptor.hook_library_builds(shared)
    return shared
