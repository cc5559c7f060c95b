"""Every compiler setting a compile reads is in the key, reaches the compile
worker, or is declared unable to change code (docs/keys.md, "Compiler
configuration"; kcache/_torch_adaptor/config_table.py, global_flags.py).

- Drift: an entry of any config module that PyTorch keeps out of its cache
  keys and kcache has not decided, or a field of Dynamo's global-state
  guard kcache has not classified, fails; so does a committed table
  (docs/config-table/, docs/keys.md) that is not this torch's.
- Generated flips: every classified entry gets a new value of its type;
  a keyed one must move the fingerprint, a neutral one must not. Each
  keyed flip, with a pass and the matmul precision, then goes through the
  worker's snapshot into a fresh process, which must compute the same
  fingerprint.
- Passes: keyed by uuid(); none (or None) refuses the region; a pass that
  does not pickle keeps the block off the worker.
"""

from __future__ import annotations

import copy
import pickle
import random
import subprocess
import sys

import pytest
import torch

from kcache import _torch_adaptor as adaptor
from kcache._torch_adaptor import config_key, config_table, global_flags
from kc_testing import PYTHON, REPO, python_env

sys.path.insert(0, str(REPO / "tests"))
from models.passes import NoUuid, ScaleFirstOutput  # noqa: E402


def test_every_entry_and_global_state_field_is_classified():
    assert config_table.unclassified() == []
    assert set(global_flags.guard_fields()) <= set(global_flags.GUARD_FIELDS)  # a later release may have more
    assert set(config_table.available()) == set(config_table.MODULES)  # every module exists here


def test_the_committed_table_is_this_torchs():
    out = subprocess.run([PYTHON, str(REPO / "scripts" / "config_table.py"), "--check"],
                         capture_output=True, text=True, timeout=300, env=python_env())
    assert out.returncode == 0, out.stdout + out.stderr


_FLIP = "kcache-flip"


def _flipped(cfg, name: str):
    """A new value of the entry's type, or None where none is generated."""
    value = getattr(cfg, name)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 1 if value == value and abs(value) != float("inf") else 1.0
    if isinstance(value, str):
        return value + _FLIP
    if isinstance(value, list):
        return [*value, _FLIP]
    if isinstance(value, tuple):
        return (*value, _FLIP)
    if isinstance(value, set | frozenset):
        return type(value)({*value, _FLIP})
    if isinstance(value, dict):
        return {**value, _FLIP: 1}
    if value is None:
        return _FLIP
    return None


# Entries whose serializer reads the value as something else than data
# (a factory PyTorch calls): flipped by the pass tests below instead.
_NOT_FLIPPED = {("inductor", "inductor_choices_class")}


def _flips():
    mods = config_table.available()
    for row in config_table.rows():
        if row.cls not in ("key", "neutral") or (row.module, row.name) in _NOT_FLIPPED:
            continue
        cfg = mods[row.module]
        if (row.module, row.name) in {(m, n) for m, names in config_table.PASS_ENTRIES.items() for n in names}:
            new = ScaleFirstOutput(1.25) if getattr(cfg, row.name) in (None, [], ()) else None
        else:
            new = _flipped(cfg, row.name)
        yield row, cfg, new


def test_every_keyed_entry_moves_the_key_and_no_neutral_one_does():
    before = adaptor.config_fingerprint()
    tried = {"key": 0, "neutral": 0}
    no_value = []
    for row, cfg, new in _flips():
        if new is None:
            no_value.append(f"{row.module}.{row.name}")
            continue
        with cfg.patch({row.name: new}):
            now = adaptor.config_fingerprint()
        tried[row.cls] += 1
        if row.cls == "key":
            assert now != before, f"{row.module}.{row.name} = {new!r} did not move the key"
        else:
            assert now == before, f"{row.module}.{row.name} is neutral but moved the key"
        assert adaptor.config_fingerprint() == before
    print(f"flips: {tried}; no generated value: {len(no_value)} {no_value}")
    assert tried["key"] > 800 and tried["neutral"] > 30
    assert len(no_value) <= 10, no_value  # entries of a type the generator does not know


def test_default_settings_keep_the_keys_they_had():
    """Keys of a job that sets nothing new did not move when kcache began
    keying passes, private entries and global flags (golden keys pin it)."""
    assert config_key._set_beyond() == []
    assert global_flags.key_part() == []


def test_a_pass_is_keyed_by_its_uuid_and_refused_without_one():
    before = adaptor.config_fingerprint()
    cfg = torch._inductor.config
    for name in ("post_grad_custom_post_pass", "post_grad_custom_pre_pass", "joint_custom_pre_pass"):
        with cfg.patch({name: ScaleFirstOutput(1.5)}):
            a = adaptor.config_fingerprint()
        with cfg.patch({name: ScaleFirstOutput(2.0)}):  # another uuid
            b = adaptor.config_fingerprint()
        with cfg.patch({name: ScaleFirstOutput(1.5)}):
            assert adaptor.config_fingerprint() == a  # the uuid, not the object
        assert len({before, a, b}) == 3
        for bad in (NoUuid(), lambda g: None, [ScaleFirstOutput(1.5), NoUuid()]):
            with cfg.patch({name: bad}), pytest.raises(adaptor.NotKeyable, match=name):
                adaptor.config_fingerprint()
    none_uuid = ScaleFirstOutput(1.5)
    none_uuid.uuid = lambda: None
    with cfg.patch({"post_grad_custom_post_pass": none_uuid}), pytest.raises(adaptor.NotKeyable, match="None"):
        adaptor.config_fingerprint()
    assert adaptor.config_fingerprint() == before


def test_global_flags_are_keyed_and_set_back():
    before = adaptor.config_fingerprint()
    saved = global_flags.read()
    try:
        seen = {before}
        torch.set_float32_matmul_precision("high")
        seen.add(adaptor.config_fingerprint())
        torch.set_float32_matmul_precision("medium")
        seen.add(adaptor.config_fingerprint())
        torch.use_deterministic_algorithms(True, warn_only=True)
        seen.add(adaptor.config_fingerprint())
        assert len(seen) == 4
    finally:
        global_flags.apply(saved)
    assert adaptor.config_fingerprint() == before and global_flags.read() == saved


_CHILD = r"""
import pickle, sys
sys.path.insert(0, sys.argv[1])
import torch
from kcache import _torch_adaptor as adaptor
from kcache.background.skeleton import applied
context = pickle.loads(sys.stdin.buffer.read())
with applied(context) as failed:
    print(adaptor.config_fingerprint(), failed)
"""


def test_the_worker_compiles_under_every_keyed_setting():
    """The worker's side (skeleton.applied) in a fresh process: a random
    draw of keyed flips, a pass and the matmul precision give the rank's
    fingerprint there."""
    from kcache.background import skeleton

    rng = random.Random(20261207)
    flips = [(row, cfg, new) for row, cfg, new in _flips() if row.cls == "key" and new is not None
             and not isinstance(new, ScaleFirstOutput)]
    chosen = rng.sample(flips, 40)
    saved = global_flags.read()
    patches = [cfg.patch({row.name: new}) for row, cfg, new in chosen]
    patches.append(torch._inductor.config.patch(post_grad_custom_post_pass=ScaleFirstOutput(1.5)))
    try:
        for p in patches:
            p.__enter__()
        torch.set_float32_matmul_precision("high")
        rank = adaptor.config_fingerprint()
        context = skeleton.context()
    finally:
        global_flags.apply(saved)
        for p in reversed(patches):
            p.__exit__(None, None, None)
    out = subprocess.run([PYTHON, "-c", _CHILD, str(REPO / "tests")], input=pickle.dumps(context),
                         capture_output=True, timeout=300, env=python_env())
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    fingerprint, failed = out.stdout.decode().split()[0], out.stdout.decode().split(" ", 1)[1].strip()
    assert failed == "[]"
    assert fingerprint == rank


def test_a_set_config_that_does_not_pickle_keeps_the_block_off_the_worker():
    from kcache.background import skeleton

    class LocalPass(ScaleFirstOutput):  # defined in a function: the worker cannot import it
        pass

    with torch._inductor.config.patch(post_grad_custom_post_pass=LocalPass(1.5)):
        with pytest.raises(adaptor.NotCarried, match="post_grad_custom_post_pass"):
            adaptor.config_snapshot()
        with pytest.raises(skeleton.NotReproducible, match="post_grad_custom_post_pass"):
            skeleton.context()
    assert "post_grad_custom_post_pass" not in skeleton.context()["configs"]["inductor"]


def test_a_worker_drops_what_its_previous_job_set():
    """config_restore sets a kcache-keyed entry back to its default when
    the next job's snapshot does not name it."""
    cfg = torch._inductor.config
    base = adaptor.config_snapshot()
    with_tp = copy.deepcopy(base)
    with_tp["inductor"]["_micro_pipeline_tp"] = True
    try:
        assert adaptor.config_restore(with_tp) == [] and cfg._micro_pipeline_tp is True
        assert adaptor.config_restore(base) == [] and cfg._micro_pipeline_tp is False
    finally:
        cfg._micro_pipeline_tp = False


def test_an_edited_ignore_list_hides_no_entry_from_the_key():
    """PyTorch's portable view leaves out what `_cache_config_ignore_prefix`
    names: a job that adds a code-shaping entry to it must not take that
    entry out of kcache's key (the flip generator found the list moving keys
    on torch 2.14, where an added prefix matched the `xpu.` entries)."""
    before = adaptor.config_fingerprint()
    cfg = torch._inductor.config
    with cfg.patch(_cache_config_ignore_prefix=[*cfg._cache_config_ignore_prefix, "max_autotune", "x"]):
        assert adaptor.config_fingerprint() == before
        with cfg.patch(max_autotune=not cfg.max_autotune):
            assert adaptor.config_fingerprint() != before
