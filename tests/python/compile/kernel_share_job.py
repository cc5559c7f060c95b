"""One process of test_shared_kernels.py: stock torch.compile of a small
function whose CPU kernel libraries are built through kcache's store
(kcache.background.shared_kernels), as a compile worker builds them.

    python kernel_share_job.py MODE     # MODE: plain | forge

forge: before each library is built, a forged bundle is stored under its
key (the first one not an ELF file, the others an ELF file under another
library's name), so the fetch must refuse it and build the library here.
Prints one JSON line: the sharing totals, the libraries asked for, and the
largest difference from eager."""

from __future__ import annotations

import json
import sys

import torch

from kcache.artifacts import bundle_io
from kcache.background import shared_kernels
from kcache.state import store


def f(x, y):
    # Two kernels (a library each) around two matmuls (extern calls).
    a = torch.nn.functional.gelu(x @ y) + x.sum(0).softmax(0)
    return torch.sigmoid(a @ y) * 2


def main(mode: str) -> None:
    client = store.get_store()
    shared = shared_kernels.share(client)
    assert shared is not None, "this torch has no library build hook"
    asked: list[str] = []
    real = shared_kernels.SharedKernels.__call__

    def call(self, target, build):
        name = target.rsplit("/", 1)[-1]
        asked.append(name)
        if mode == "forge":
            key, expl = shared_kernels.kernel_key(name)
            payload = {name: b"not a library"} if len(asked) == 1 else {"other.so": b"\x7fELF" + b"\0" * 60}
            assert client.put(key, bundle_io.pack_precompiled(key, expl, binaries=payload))
        return real(self, target, build)

    shared_kernels.SharedKernels.__call__ = call
    torch.manual_seed(0)
    x, y = torch.randn(16, 16), torch.randn(16, 16)
    out = torch.compile(f)(x, y)
    print(json.dumps({"totals": shared.totals(), "asked": asked,
                      "max_err": (out - f(x, y)).abs().max().item()}))


if __name__ == "__main__":
    main(sys.argv[1])
