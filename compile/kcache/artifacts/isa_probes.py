"""Inductor's CPU ISA probe binaries, shared through the cache.

A fresh Inductor cache directory (a new node, a container) makes Inductor
compile one probe program per candidate vector ISA before it can pick one:
about 10 s on 2 cores, more than restoring a whole model's regions. The
probes depend only on the host compiler and its flags, so they are stored
as one more cache entry, keyed by the toolchain, the compiler's resolution
of -march=native and the environment — never by the ISA, which is what the
probes decide. Restoring them leaves Inductor only the checks themselves
(loading each probe on this CPU in a child Python, ~0.4 s), so a wrong CPU
still cannot pass.

The checks' verdicts are then remembered per node (kcache.keys.host_facts,
keyed by the compiler binary, the CPU's feature flags and the torch build):
a later process on this node answers Inductor's checks from that record
and fetches no probes at all. A process on a new node (a fresh container)
asks the server for the record of its machine type instead
(kcache.artifacts.machine_facts: keyed by CPU model and flags, compiler and
torch, and refused unless those equal this machine's); the first process of
a machine type probes and publishes it.
"""

from __future__ import annotations

import json
import logging
import os
import threading

import torch

from kcache import _core
from kcache.artifacts import bundle_io
from kcache.keys import host_facts
from kcache.keys import fields as keyfields
from kcache import _torch_adaptor as adaptor
from kcache.keys.env_table import env_field
from kcache.keys.make import key_of
from kcache.state import counters

from . import machine_facts

log = logging.getLogger("kcache")
_done = False
_lock = threading.Lock()

REGION = "kcache:inductor-isa-probes-v1"


def probe_key() -> tuple[str, str]:
    fields = {
        "region": REGION,
        "dtype": "-",
        "target": json.dumps({"cxx": keyfields.compiler_identity(),
                              "march_native": keyfields.native_target_flags()}, sort_keys=True),
        "mode": "-",
        "toolchain": keyfields.toolchain_field(),
        "env": env_field(),
    }
    return key_of(fields, "inductor-isa-probes/cpu/-/-/-")


def _build(key: str, explanation: str) -> bytes:
    adaptor.cpu_vec_isa()  # compiles (and checks) the probes
    cap = adaptor.Capture()
    cap.binaries = adaptor.isa_probe_binaries()
    return bundle_io.pack(key, explanation, cap, 0.0, allow_empty_cache=True)  # binaries only


def _record_inputs() -> dict:
    return {"torch": torch.__version__, "torch_lib": os.path.dirname(torch.__file__),
            "cxx": host_facts.compiler_stamp(adaptor.host_compiler()),
            "cpu_flags": host_facts.cpu_flags()}


def ensure(store) -> None:
    """Answers Inductor's ISA checks once per process, before anything asks
    Inductor for its vector ISA: from this node's record, else from the
    server's record for this machine type (kcache.artifacts.machine_facts),
    else by running the probes (their binaries restored or built and shared
    here) and recording the answers for both. Never fails the job; every
    probe that really runs is counted (isa_probes_run).

    `store` may refuse to wait (kcache.background's stores): its exception
    leaves the checks unanswered, for a later call to answer."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        try:
            _answer(store)
        except BaseException:
            _done = False
            raise


def _answer(store) -> None:
    if adaptor.isa_checks_done():
        return
    inputs = _record_inputs()
    try:
        known = json.loads(host_facts.lookup("isa-checks", inputs) or "{}")
    except ValueError:
        known = {}
    known = known if isinstance(known, dict) else {}
    on_node = dict(known)
    probed: dict[str, bool] = {}
    if not known:
        known = _machine_record(store, probed)
    with adaptor.isa_checks(known) as answers:
        if not known and not probed:
            _share(store)
        adaptor.cpu_vec_isa()
    ran = [n for n in answers if not isinstance(known.get(n), bool)]
    counters.bump(isa_probes_run=len(ran))
    answers = {**probed, **answers}
    if answers and answers != on_node:
        host_facts.remember("isa-checks", inputs, json.dumps(answers, sort_keys=True))


def _machine_record(store, probed: dict[str, bool]) -> dict[str, bool]:
    """The ISA checks of the server's record for this machine (seeding its
    -march=native answer too), or {} when there is none to use. Holding the
    record's lease, this process probes (filling `probed`) and shares it."""
    def make() -> tuple[dict[str, bool], str]:
        with adaptor.isa_checks({}) as answers:
            _share(store)
            adaptor.cpu_vec_isa()
        probed.update(answers)
        counters.bump(isa_probes_run=len(answers))
        return dict(answers), keyfields.native_target_flags()

    try:
        record = machine_facts.fetch_or_make(store, make)
    except (_core.KcacheError, OSError, ValueError) as e:
        log.warning("kcache: machine facts not shared (%s); Inductor's probes run here", e)
        return {}
    if record is None:
        return {}
    host_facts.seed("march-native", keyfields.native_target_inputs(), record["march_native"])
    return dict(record["isa_checks"])


def _share(store) -> None:
    try:
        key, explanation = probe_key()
        data, source = store.get_or_compile(key, lambda: _build(key, explanation), explanation)
        if source in ("node", "server"):
            bundle = bundle_io.unpack(data, key)
            adaptor.restore_region(b"", bundle.binaries)
    except (_core.KcacheError, OSError, ValueError) as e:
        log.warning("kcache: ISA probes not shared (%s); Inductor builds its own", e)
