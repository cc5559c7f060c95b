"""The guard table (kcache/_torch_adaptor/guard_checks.py GUARD_TABLE: the
base rows and this release's own, releases/v*.py; docs/precompiled.md
"Guards" lists every release's) lists every guard type this torch can build: a torch that adds one fails here, loudly, before a region meets
it (where it would take the traced path)."""

from __future__ import annotations

import re
import types

import pytest

from kc_testing import REPO

from kcache._torch_adaptor import guard_checks


def builder_guard_types() -> set[str]:
    from torch._dynamo.guards import GuardBuilder

    return {n for n, v in vars(GuardBuilder).items() if n.isupper() and callable(v)}


def test_every_guard_type_torch_builds_is_in_the_table():
    built = builder_guard_types()
    assert len(built) > 30  # the probe itself still finds GuardBuilder's methods
    assert built - set(guard_checks.GUARD_TABLE) == set(), "guard types kcache does not know"
    assert set(guard_checks.GUARD_TABLE) - built == set(), "table rows torch no longer builds"


def test_the_docs_table_is_the_code_table():
    text = (REPO / "docs" / "precompiled.md").read_text()
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| (\w+) \|", text, re.M))
    assert rows == guard_checks.every_release_rows()
    assert set(guard_checks.GUARD_TABLE) <= set(rows)


def _entry(guard_type: str, name: str = "L['block'].x"):
    guard = types.SimpleNamespace(name=name, originating_source=None, create_fn=None)
    return types.SimpleNamespace(guard_type=guard_type, name=name, orig_guard=guard, is_global=False,
                                 has_value=False, value=None)


@pytest.mark.parametrize("guard_type", ["SOME_FUTURE_MATCH", "WEAKREF_ALIVE"])
def test_an_unknown_or_unportable_guard_sends_the_region_to_the_traced_path(guard_type):
    with pytest.raises(guard_checks.NoPortableCheck, match=guard_type):
        guard_checks.portable_checks([_entry(guard_type)], {}, {}, lambda path, f_locals: None,
                                     lambda *a: None)


def test_a_source_kcache_cannot_follow_has_no_portable_check():
    class WeirdSource:
        base = None

    with pytest.raises(guard_checks.NoPortableCheck, match="WeirdSource"):
        guard_checks.source_path(WeirdSource(), {})
