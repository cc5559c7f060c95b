"""AOTInductor packages: compile and load."""

from __future__ import annotations

import torch


def aoti_compile_package(exported, package_path: str) -> str:
    """Compiles a torch.export program into an AOTInductor package (.pt2)
    whose weights are not baked in: the loader binds each block's own
    tensors (update_constant_buffer / load_constants).

    AOTInductor writes the host's ISA into the global
    inductor config aot_inductor.metadata and leaves it there; that entry is
    part of every later key's config hash, so it is restored here.
    """
    with torch._inductor.config.patch({"aot_inductor.metadata": dict(
            torch._inductor.config.aot_inductor.metadata)}):
        return torch._inductor.aoti_compile_and_package(
            exported, package_path=package_path,
            inductor_configs={"aot_inductor.package_constants_in_so": False})


def aoti_load_package(package_path: str):
    """PyTorch's Python loader for a .pt2 package (tests, the Python reference run)."""
    return torch._inductor.aoti_load_package(package_path)
