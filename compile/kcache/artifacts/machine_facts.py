"""What Inductor's probes find about a machine, shared per machine type.

A fresh container runs Inductor's CPU checks (one probe library per
candidate vector ISA, each loaded in a child Python) and asks the host
compiler what `-march=native` means before its first region can be keyed:
about a second on an AVX-512 host (bench/warmstart/profile_fresh_node.txt),
in every container, because the node directory that remembers the answers
(kcache.keys.host_facts) is new too. The answers depend only on the CPU
(model and feature flags), the compiler and the torch build, so they are
stored on the server as one more entry, keyed by exactly those, and
fetched by every later container on the same kind of machine.

A record is trusted only when the inputs it carries equal this machine's,
read live (the CPU's flags from /proc/cpuinfo, the compiler's own version
line, torch's version and commit): a record made on another CPU is refused,
said once and counted, and the probes run as before. The first container
of a machine type computes the record under the entry's lease, so a
cluster probes once per machine type (docs/keys.md "Target").
"""

from __future__ import annotations

import json
import logging
import pathlib
import re
from typing import Any, Callable

import torch

from kcache.artifacts import bundle_io
from kcache.keys import fields as keyfields
from kcache.keys import host_facts
from kcache.keys.env_table import env_field
from kcache.keys.make import key_of
from kcache.state import counters

log = logging.getLogger("kcache")

REGION = "kcache:machine-facts-v1"
_MARCH = re.compile(r"^[0-9a-f]{16}$")


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "CPU part")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def machine_inputs() -> dict[str, Any]:
    """What decides the facts, read on this machine now."""
    return {"cpu_model": cpu_model(), "cpu_flags": host_facts.cpu_flags(),
            "cxx": keyfields.compiler_identity(), "torch": torch.__version__,
            "torch_git": torch.version.git_version}


def facts_key(inputs: dict[str, Any]) -> tuple[str, str]:
    fields = {"region": REGION, "dtype": "-", "target": json.dumps(inputs, sort_keys=True),
              "mode": "-", "toolchain": "-", "env": env_field()}
    return key_of(fields, "machine-facts/cpu/-/-/-")


def pack(key: str, explanation: str, inputs: dict[str, Any], isa_checks: dict[str, bool],
         march_native: str) -> bytes:
    return bundle_io.pack_precompiled(key, explanation, index={
        "machine_facts": {"inputs": inputs, "isa_checks": isa_checks, "march_native": march_native}})


def refusal(record: Any, inputs: dict[str, Any]) -> str | None:
    """Why a record may not be used on this machine, or None."""
    if not isinstance(record, dict):
        return "not a machine-facts record"
    theirs = record.get("inputs")
    if not isinstance(theirs, dict):
        return "it names no inputs"
    differs = sorted(k for k in set(theirs) | set(inputs) if theirs.get(k) != inputs.get(k))
    if differs:
        return "made on another machine (" + ", ".join(differs) + " differ)"
    checks = record.get("isa_checks")
    if not isinstance(checks, dict) or not checks or \
            not all(isinstance(k, str) and isinstance(v, bool) for k, v in checks.items()):
        return "its ISA checks are malformed"
    if not isinstance(record.get("march_native"), str) or not _MARCH.match(record["march_native"]):
        return "its -march=native digest is malformed"
    return None


def fetch_or_make(store, make: Callable[[], tuple[dict[str, bool], str]]) -> dict | None:
    """The record for this machine: from the node or the server, or made
    here by `make()` (which runs the probes: (ISA checks, -march=native))
    under the entry's lease and shared. None when none can be used (the
    caller probes as before)."""
    inputs = machine_inputs()
    key, explanation = facts_key(inputs)
    made: dict[str, Any] = {}

    def produce() -> bytes:
        checks, march = make()
        made.update(isa_checks=checks, march_native=march)
        return pack(key, explanation, inputs, checks, march)

    data, source = store.get_or_compile(key, produce, explanation)
    if made:
        return None  # probed here: nothing to seed
    record = (bundle_io.unpack(data, key).index or {}).get("machine_facts")
    why = refusal(record, inputs)
    if why is not None:
        counters.bump(machine_facts_refused=1)
        log.warning("kcache: machine facts %s refused: %s; Inductor's probes run here", key[:12], why)
        store.drop_node_copy(key)
        return None
    counters.bump(machine_facts_hits=1)
    log.info("kcache: %s machine facts %s: no ISA probe runs here", source, key[:12])
    return record
