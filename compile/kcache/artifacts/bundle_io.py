"""A region's captured compile ⇄ a kcache artifact bundle.

Sections: "torch/mega_cache" holds PyTorch's Mega-Cache bytes (FX-graph and
AOTAutograd cache entries); a precompiled region holds "dynamo/aot_function"
(Dynamo's serialized function) or "kcache/precompiled_index" (JSON: which
per-block constants choose its variant, or why it falls back) instead;
"inductor/<path>" holds each compiled binary at
its path relative to the Inductor cache directory. The manifest carries the
key's explanation, the label, the producer, compile seconds, PyTorch's own
cache-entry keys and every cubin the bundle carries with its ELF arch
("cubins": binaries that are cubins and the Triton cubins inside the
Mega-Cache); a restore refuses cubins for another GPU arch (docs/artifact.md). Framing, compression, the trailer and
signatures are the C++ core's (artifact/), reached through kcache._core.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass

from kcache import _core
from kcache import _torch_adaptor as adaptor
from kcache._torch_adaptor import Capture

MEGA_CACHE = "torch/mega_cache"
AOT_FUNCTION = "dynamo/aot_function"  # a precompiled region (kcache.precompiled)
PRECOMPILED_INDEX = "kcache/precompiled_index"  # JSON: a region's variant rule or fallback
CARRIED_GRAPH = "kcache/carried_graph"  # a traced region compiled by a worker (graph_ship)
BINARY_PREFIX = "inductor/"
TRITON_PREFIX = MEGA_CACHE + ":triton/"  # names of cubins inside the Mega-Cache


class WrongArch(ValueError):
    """The bundle carries cubins for another GPU arch than the running one."""


@dataclass
class Restorable:
    manifest: dict
    mega_cache: bytes
    binaries: dict[str, bytes]
    aot_function: bytes = b""
    index: dict | None = None
    carried_graph: bytes = b""  # set: restore compiles this graph, not the traced one


def _manifest(key: str, explanation: str, compile_seconds: float,
              binaries: dict[str, bytes]) -> dict:
    return {
        "key": key,
        "explanation": json.loads(explanation),
        "label": json.loads(explanation)["label"],
        "producer": {"host": platform.node(), "pid": os.getpid(), "time": int(time.time()),
                     "kcache": "0.1.0"},
        "compile_seconds": round(compile_seconds, 3),
        "binaries": sorted(binaries),
    }


class EmptyCapture(ValueError):
    """A region compiled, but Inductor's caches recorded nothing for it (a
    bypassed FX-graph cache): a bundle of it would restore nothing."""


def pack(key: str, explanation: str, capture: Capture, compile_seconds: float,
         signing_key_pem: str | None = None, *, allow_empty_cache: bool = False,
         carried_graph: bytes = b"") -> bytes:
    """A traced region's bundle; `carried_graph`: the graph a compile worker
    compiled (kcache.traced.offthread), which every restore compiles again
    from PyTorch's caches (their entries are keyed by that graph)."""
    if not capture.mega_cache and not allow_empty_cache:
        raise EmptyCapture("Inductor's caches recorded nothing for this region "
                           "(its FX-graph cache was bypassed?)")
    manifest = _manifest(key, explanation, compile_seconds, capture.binaries)
    manifest["torch_cache_keys"] = capture.torch_keys
    sections = [(MEGA_CACHE, capture.mega_cache)]
    if carried_graph:
        manifest["compiled_from"] = "carried graph"
        sections.append((CARRIED_GRAPH, carried_graph))
    sections += [(BINARY_PREFIX + rel, data) for rel, data in sorted(capture.binaries.items())]
    manifest["cubins"] = list_cubins(sections, capture.mega_cache)
    return _core.write_bundle(json.dumps(manifest), sections, signing_key_pem)


def pack_precompiled(key: str, explanation: str, *, aot_function: bytes = b"",
                     binaries: dict[str, bytes] | None = None, index: dict | None = None,
                     compile_seconds: float = 0.0, extra: dict | None = None,
                     signing_key_pem: str | None = None) -> bytes:
    """A precompiled region's bundle: either one variant (Dynamo's serialized
    function and every kernel binary it loads) or the region's index (which
    per-block constants choose the variant, or why it falls back)."""
    binaries = binaries or {}
    manifest = {**_manifest(key, explanation, compile_seconds, binaries), **(extra or {})}
    sections = []
    if aot_function:
        sections.append((AOT_FUNCTION, aot_function))
    if index is not None:
        sections.append((PRECOMPILED_INDEX, json.dumps(index, sort_keys=True).encode()))
    sections += [(BINARY_PREFIX + rel, data) for rel, data in sorted(binaries.items())]
    manifest["cubins"] = list_cubins(sections, b"")
    return _core.write_bundle(json.dumps(manifest), sections, signing_key_pem)


def list_cubins(sections: list[tuple[str, bytes]], mega_cache: bytes) -> list[dict]:
    """[{"name", "arch"}] of every cubin: sections that are cubins and the
    Triton cubins inside the Mega-Cache bytes (ELF arch read by the C++ core)."""
    inner = [(TRITON_PREFIX + name, blob)
             for name, blob in sorted(adaptor.triton_cubins(mega_cache).items())]
    return json.loads(_core.list_cubins(sections + inner))


def unpack(data: bytes, key: str, trusted_keys: list[str] | None = None,
           require_signature: bool = False, target: str | None = None) -> Restorable:
    """Verifies and opens a bundle for `key`; raises _core.KcacheError if bad
    (a malformed "cubins" listing is `corrupt`), WrongArch when `target` is
    "cuda:sm_XX" and a cubin the bundle lists or carries is for another arch."""
    manifest_text, sections, _signer = _core.read_bundle(
        data, expected_key=key, trusted_keys=trusted_keys or [],
        require_signature=require_signature)
    if target:
        try:
            _core.check_cubins(manifest_text, sections, target)
        except _core.KcacheError as e:
            if e.code != "key_mismatch":  # a corrupt listing: an ordinary unusable bundle
                raise
            raise WrongArch(str(e).removeprefix("key_mismatch: ")) from None
    manifest = json.loads(manifest_text)
    out = Restorable(manifest, b"", {})
    for name, payload in sections:
        if name == MEGA_CACHE:
            out.mega_cache = payload
        elif name == AOT_FUNCTION:
            out.aot_function = payload
        elif name == CARRIED_GRAPH:
            out.carried_graph = payload
        elif name == PRECOMPILED_INDEX:
            try:
                out.index = json.loads(payload)
            except ValueError as e:
                raise ValueError(f"bundle {key[:12]}: unreadable precompiled index ({e})") from None
        elif name.startswith(BINARY_PREFIX):
            out.binaries[name[len(BINARY_PREFIX):]] = payload
    return out
