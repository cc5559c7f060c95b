"""The rank's classes, as the compile worker must see them.

The portable checks (kcache.guards) pin every member of every class of a
block's modules, through their MROs. A rank's classes can differ from what
a fresh process imports: transformers adds `smart_apply` to nn.Module the
first time it initializes a model's weights, a job may patch a method.
The worker never built the model, so a region it compiled would fail
those checks on the rank. So the rank sends, per class of the block, each
member's digest and the member itself in a form the worker can rebuild
(functions.py): a function its import has, by name (a method replaced by
another module-level function); one it has not (defined inside another),
by its code, defaults and closure; a property by its functions; any other
value by pickle. The worker installs those whose digest differs there,
then compares every digest: a class that still differs is named, and the
worker refuses the region (the rank compiles it itself, as before).
"""

from __future__ import annotations

import torch

from kcache.guards import describe

from . import functions


def _key(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


def classes_of(block: torch.nn.Module) -> list[type]:
    seen: dict[tuple[str, str], type] = {}
    for m in block.modules():
        for c in describe.mro_of(type(m)):
            seen.setdefault(_key(c), c)
    return list(seen.values())


def _members(classes: list[type]) -> dict:
    out = {}
    for cls in classes:
        members = {}
        for name, digest in describe.member_digests(cls).items():
            value = vars(cls)[name]
            try:  # by name where the worker's import has it, else by code or value
                frozen = functions.freeze(value)
            except functions.CannotFreeze:
                frozen = None
            members[name] = (digest, frozen)
        out[_key(cls)] = members
    return out


def capture(block: torch.nn.Module) -> dict:
    """{class key: {member: (digest, frozen member or None)}} for every
    class of the block's modules (their MROs)."""
    return _members(classes_of(block))


def capture_named(classes: list[type]) -> list[tuple[tuple, dict]]:
    """Other classes (those of objects the block's code reads from module
    globals: global_state.py), each with a reference the worker resolves
    (functions.class_ref); classes with none are left out."""
    out = []
    for cls in classes:
        ref = functions.class_ref(cls)
        if ref is not None:
            out.append((ref, _members(describe.mro_of(cls))))
    return out


def apply_named(named: list[tuple[tuple, dict]]) -> None:
    """Installs what capture_named sent, where the worker resolves it."""
    for ref, state in named:
        try:
            _install(describe.mro_of(functions.thaw(ref)), state)
        except Exception:  # noqa: BLE001 - not here, or a member that does not thaw: the checks decide
            continue


def _install(classes: list[type], state: dict) -> None:
    for cls in classes:
        have = describe.member_digests(cls)
        for name, (digest, frozen) in state.get(_key(cls), {}).items():
            if have.get(name) != digest and frozen is not None:
                setattr(cls, name, functions.thaw(frozen))


def apply(block: torch.nn.Module, state: dict) -> list[str]:
    """Installs the rank's members that differ here and can be; the
    members that still differ ("module.Class.member"), none when the
    classes agree. (Installed first, compared after: one class's member
    can describe another class.)"""
    classes = classes_of(block)
    _install(classes, state)
    differ = []
    for cls in classes:
        want = state.get(_key(cls))
        if want is None:
            differ.append(f"{cls.__module__}.{cls.__qualname__} (not in the rank's block)")
            continue
        have = describe.member_digests(cls)
        for name in sorted(set(want) | set(have)):
            if have.get(name) != (want.get(name) or (None,))[0]:
                differ.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    return differ
