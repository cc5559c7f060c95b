"""One AOTInductor region: export, key, compile into a package, bundle it.

The key is a region key like any other (docs/keys.md): the region field is
the canonical text of the torch.export graph (parameters and buffers are
placeholders there, so identical blocks share it), and the mode field says
backend "aotinductor", mode "aoti", phase "infer", with the dynamic-shape
ranges the package accepts. The bundle has one section, "aoti/package.pt2"
(PyTorch's package, weights not baked in), and its manifest an "aoti" entry
naming the constants the loader must bind and the stage's input and output
names (docs/artifact.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass

import torch

from kcache import _core
from kcache.keys import fields as keyfields
from kcache import _torch_adaptor as adaptor
from kcache.aoti.stages import Stage
from kcache.keys.fingerprint import fingerprint_graph
from kcache.keys.graph_key import dtype_label
from kcache.keys.fields import CompileSettings
from kcache.keys.make import key_of

PACKAGE = "aoti/package.pt2"
FORMAT = "kcache-aoti-v1"

_ROLES = {"PARAMETER": "param", "BUFFER": "buffer", "CONSTANT_TENSOR": "const",
          "USER_INPUT": "act", "CUSTOM_OBJ": "obj", "TOKEN": "token"}


@dataclass
class ExportedRegion:
    stage: Stage
    program: object            # torch.export.ExportedProgram
    fields: dict[str, str]     # every key field, full values
    key: str
    explanation: str
    label: str


def settings_for(stage: Stage) -> CompileSettings:
    dynamic = {name: {str(d): n for d, n in dims.items()} for name, dims in stage.dynamic.items()}
    ranges = {n: list(r) for n, r in stage.ranges.items()}
    return CompileSettings(backend="aotinductor", mode="aoti", dynamic=bool(dynamic),
                           options={"dynamic_dims": dynamic, "dim_ranges": ranges,
                                    "package_constants_in_so": False})


def _dynamic_shapes(stage: Stage):
    dims = {n: torch.export.Dim(n, min=lo, max=hi) for n, (lo, hi) in stage.ranges.items()}
    return tuple({d: dims[n] for d, n in stage.dynamic.get(name, {}).items()} or None
                 for name in stage.inputs)


def _placeholders(program) -> tuple[list, list[str]]:
    """Example values and roles of the exported graph's placeholders, in order."""
    state = {**dict(program.named_parameters()), **dict(program.named_buffers()),
             **program.constants}
    values, roles = [], []
    for spec in program.graph_signature.input_specs:
        roles.append(_ROLES.get(spec.kind.name, spec.kind.name.lower()))
        values.append(state.get(spec.target) if spec.target else None)
    return values, roles


def export(stage: Stage, *, target: str | None = None, toolchain: str | None = None,
           env: str | None = None) -> ExportedRegion:
    with torch.no_grad():
        program = torch.export.export(stage.module.eval(), stage.example,
                                      dynamic_shapes=_dynamic_shapes(stage), strict=False)
        values, roles = _placeholders(program)
        fp = fingerprint_graph(program.graph_module, values, roles=roles, value_meta="val")
        settings = settings_for(stage)
        fields = keyfields.all_fields(fp.canonical, settings, False, "cpu",
                                      target=target, toolchain=toolchain, env=env)
    label = keyfields.label(stage.region_name, settings, False, "cpu",
                            dtype_label(list(stage.module.parameters())))
    key, explanation = key_of(fields, label, {"region": fp.summary()})
    return ExportedRegion(stage, program, fields, key, explanation, label)


def compile_bundle(region: ExportedRegion, signing_key_pem: str | None = None) -> bytes:
    """Compiles the region with AOTInductor and packs the package as a bundle."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kcache-aoti-") as tmp:
        path = adaptor.aoti_compile_package(region.program, os.path.join(tmp, "region.pt2"))
        package = open(path, "rb").read()
        fqns = sorted(adaptor.aoti_load_package(path).get_constant_fqns())
    seconds = time.perf_counter() - start
    manifest = {
        "key": region.key,
        "explanation": json.loads(region.explanation),
        "label": region.label,
        "producer": {"host": platform.node(), "pid": os.getpid(), "time": int(time.time()),
                     "kcache": "0.1.0"},
        "compile_seconds": round(seconds, 3),
        "aoti": {
            "format": FORMAT,
            "constant_fqns": fqns,
            "inputs": region.stage.inputs,
            "outputs": region.stage.outputs,
            "region_sha256": hashlib.sha256(region.fields["region"].encode()).hexdigest(),
            "package_sha256": hashlib.sha256(package).hexdigest(),
            "torch": adaptor.torch_version(),
        },
    }
    return _core.write_bundle(json.dumps(manifest), [(PACKAGE, package)], signing_key_pem)
