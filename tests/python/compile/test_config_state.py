"""The compiler configuration's fingerprint, memoized
(kcache/_torch_adaptor/config_state.py): never stale.

A generator draws changes of every kind a job makes to Inductor's,
functorch's and Dynamo's configs (set an entry, set it inside patch(),
edit a list or dict value in place, set it back) and, after each, the
memoized fingerprint must equal one computed from scratch.
"""

from __future__ import annotations

import copy
import random

import pytest
import torch
import torch._dynamo.config
import torch._functorch.config
import torch._inductor.config

from kcache._torch_adaptor import config_key, config_state

CONFIGS = (torch._inductor.config, torch._functorch.config, torch._dynamo.config)
_SHORT = {torch._inductor.config: "inductor", torch._functorch.config: "functorch", torch._dynamo.config: "dynamo"}


def _fresh() -> str:
    return config_key._fingerprint()


def test_the_pinned_torchs_configs_have_the_layout_the_memo_reads():
    """Drift: a torch whose configs moved gets no memo (correct, 3 ms a
    call slower); this says so loudly instead."""
    now = config_state.state(CONFIGS, config_key._stable_repr)
    assert now is not None
    assert len(now[0]) > 800
    assert config_state.same(now, config_state.state(CONFIGS, config_key._stable_repr))


def _entries(kind: type) -> list[tuple]:
    """(config, name) of the code-shaping entries whose value is a `kind`."""
    out = []
    for cfg in CONFIGS:
        portable = config_key.releases.portable_config(cfg)
        for name, value in portable.items():
            neutral = config_key.config_table.NEUTRAL.get(_SHORT[cfg], {})
            if type(value) is kind and name not in neutral and "." not in name:
                out.append((cfg, name))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_the_memoized_fingerprint_is_never_stale(seed):
    rng = random.Random(seed)
    bools, ints, lists = _entries(bool), _entries(int), _entries(list) + _entries(dict)
    assert bools and ints and lists
    originals = {}
    seen = {config_key.config_fingerprint()}
    try:
        for _ in range(40):
            change = rng.choice(["bool", "int", "inplace", "patch", "restore"])
            before = config_key.config_fingerprint()
            if change == "bool":
                cfg, name = rng.choice(bools)
                originals.setdefault((cfg, name), getattr(cfg, name))
                setattr(cfg, name, not getattr(cfg, name))
            elif change == "int":
                cfg, name = rng.choice(ints)
                originals.setdefault((cfg, name), getattr(cfg, name))
                setattr(cfg, name, getattr(cfg, name) + rng.randint(1, 5))
            elif change == "inplace":
                cfg, name = rng.choice(lists)
                originals.setdefault((cfg, name), copy.deepcopy(getattr(cfg, name)))
                value = getattr(cfg, name)  # the user's copy: edited in place, same object
                if isinstance(value, list):
                    value.append(f"kcache-test-{rng.random()}")
                else:
                    value[f"kcache-test-{rng.random()}"] = 1
            elif change == "patch":
                cfg, name = rng.choice(bools)
                with cfg.patch({name: not getattr(cfg, name)}):
                    inside = config_key.config_fingerprint()
                    assert inside == _fresh()
                    assert inside != before
                assert config_key.config_fingerprint() == before == _fresh()
                continue
            else:
                _restore(originals)
            now = config_key.config_fingerprint()
            assert now == _fresh(), change
            if change != "restore":
                assert now != before, change  # a code-shaping entry moved the key
            seen.add(now)
        assert len(seen) > 10  # the generator did move the configuration
    finally:
        _restore(originals)
    assert config_key.config_fingerprint() == _fresh()
    # Nothing leaks into the tests after this one (clean-clone-31: a dict
    # entry edited in place after a restore had made the kept original the
    # live value, and a later compile read the test's int in it).
    assert all(getattr(cfg, name) == value for (cfg, name), value in originals.items())
    assert not any("kcache-test" in repr(releases_portable(cfg)) for cfg in CONFIGS)


def _restore(originals: dict) -> None:
    """Each changed entry set back to a copy of its original: the kept
    original must never become the live value (an edit in place would
    then change it too)."""
    for (cfg, name), value in originals.items():
        setattr(cfg, name, copy.deepcopy(value))


def releases_portable(cfg) -> dict:
    return config_key.releases.portable_config(cfg)
