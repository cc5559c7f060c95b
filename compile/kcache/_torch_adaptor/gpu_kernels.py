"""The Triton cubins inside a GPU region's Mega-Cache bytes."""

from __future__ import annotations

import logging

import torch


def triton_cubins(mega_cache: bytes) -> dict[str, bytes]:
    """The Triton cubins inside Mega-Cache bytes, as {"<kernel hash>/<file>": bytes}.

    On GPU, Inductor bundles each graph's compiled Triton kernels into its
    FX-graph cache entry (config.bundle_triton_into_fx_graph_cache, on by
    default): the cubins a restore installs travel inside the Mega-Cache, so
    the bundle's manifest lists them from here (docs/artifact.md). Without
    CUDA there are none, and nothing is unpickled. Every failure (bytes that
    do not deserialize, an entry that does not unpickle) costs only the
    listing, with a warning: never the region's compile.
    """
    import pickle

    from torch.compiler._cache import CacheArtifactManager

    found: dict[str, bytes] = {}
    if not mega_cache or not torch.cuda.is_available():
        return found
    log = logging.getLogger("kcache")
    try:  # deserialize() logs and returns None for bytes it cannot read
        artifacts = (CacheArtifactManager.deserialize(mega_cache) or {}).get("inductor", [])
    except Exception as e:  # noqa: BLE001 - a listing gap must not fail the compile
        artifacts = []
        log.warning("kcache: cannot read the Mega-Cache to list its cubins (%s); the bundle's "
                    "manifest will not list them", e)
    for artifact in artifacts:
        try:
            entry = pickle.loads(artifact.content)
            bundle = getattr(entry, "_triton_bundle", None)
            cubins = {f"{kernel.kernel_hash}/{file.filename}": file.payload
                      for kernel in getattr(bundle, "kernel_artifacts", None) or []
                      for file in kernel.artifacts if file.filename.endswith(".cubin")}
        except Exception as e:  # noqa: BLE001 - a listing gap must not fail the compile
            log.warning(
                "kcache: cannot list the cubins of FX entry %s (%s); the bundle's "
                "manifest will not list them", getattr(artifact, "key", "?"), e)
            continue
        found.update(cubins)
    return found
