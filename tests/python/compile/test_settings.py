"""kcache.settings: every KCACHE_* variable the Python side reads is declared
once and parsed by the C++ client's rules; the two sides agree on every
variable they share (generated values, not a list); configure() leaves
os.environ alone; docs/client.md's table is the code's."""

from __future__ import annotations

import ast
import os
import pathlib
import random
import string

import pytest

import kcache
from kcache import _core, settings

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGE = pathlib.Path(kcache.__file__).parent

WORDS = ["", "0", "1", "true", "false", "yes", "no", "on", "off"]


def _spellings(rng: random.Random, n: int) -> list[str]:
    """Boolean words in random case with random surrounding whitespace, and
    random near-misses (prefixes, extra letters, digits, punctuation)."""
    out = []
    for _ in range(n):
        word = rng.choice(WORDS)
        if rng.random() < 0.3:
            word = rng.choice([word + rng.choice(string.ascii_letters), word[:-1] if word else "x",
                               str(rng.randint(2, 99)), rng.choice(["t", "y", "n", "-1", "1.0", "enable"])])
        word = "".join(c.upper() if rng.random() < 0.5 else c for c in word)
        pad = lambda: "".join(rng.choice(" \t\n") for _ in range(rng.randint(0, 2)))  # noqa: E731
        out.append(pad() + word + pad())
    return out


def _cpp(environ: dict[str, str]):
    try:
        return _core.config_from_env(environ)
    except _core.KcacheError as e:
        return e


def test_booleans_parse_alike_on_both_sides():
    rng = random.Random(50)
    values = _spellings(rng, 400)
    assert any(v.strip().lower() == "yes" for v in values) and any(v.strip() == "" for v in values)
    errors = 0
    for value in values:
        cpp = _cpp({"KCACHE_DISABLE": value})
        try:
            py = settings.parse_bool("KCACHE_DISABLE", value)
        except settings.SettingError as e:
            errors += 1
            assert isinstance(cpp, _core.KcacheError), (value, cpp)
            assert str(e) in str(cpp), (str(e), str(cpp))
            continue
        assert not isinstance(cpp, Exception), (value, cpp)
        assert cpp["disabled"] == py, value
    assert 0 < errors < len(values)  # both kinds of value were generated


@pytest.mark.parametrize("name,field", [("KCACHE_URL", "url"), ("KCACHE_TARGET", "target"),
                                        ("KCACHE_LOCAL_DIR", "local_dir")])
def test_text_settings_are_trimmed_alike(name, field):
    rng = random.Random(hash(name) & 0xFFFF)
    for _ in range(100):
        core = rng.choice(["http://127.0.0.1:8080", "cuda:sm_90", "/tmp/kc dir", "none", "off", "x"])
        value = "".join(rng.choice(" \t\n") for _ in range(rng.randint(0, 3))) + core + \
            "".join(rng.choice(" \t\n") for _ in range(rng.randint(0, 3)))
        py = settings.get(name, {name: value})
        cpp = _core.config_from_env({name: value})[field]
        if field == "local_dir" and py in ("none", "off"):
            assert cpp is None  # the node tier off, on both sides (kcache.keys.host_facts)
        else:
            assert cpp == py, (name, value, cpp, py)


def test_every_shared_setting_is_covered_by_an_agreement_test():
    shared = {s.name for s in settings.SETTINGS.values() if s.shared}
    assert shared == {"KCACHE_DISABLE", "KCACHE_URL", "KCACHE_TARGET", "KCACHE_LOCAL_DIR"}


def test_no_module_reads_a_kcache_variable_but_settings():
    """KCACHE_* names are read through kcache.settings only, and every name
    the package passes to it is declared."""
    readers, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str) and node.args[0].value.startswith("KCACHE_"):
                func = ast.unparse(node.func)
                if func.startswith("settings."):
                    used.add(node.args[0].value)
                elif path.name != "settings.py":
                    readers.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {func}")
    assert readers == []
    assert used and used <= set(settings.SETTINGS), used - set(settings.SETTINGS)


def test_a_malformed_switch_keeps_its_default_and_get_names_it(monkeypatch):
    monkeypatch.setenv("KCACHE_PRECOMPILED", "maybe")
    with pytest.raises(settings.SettingError, match="KCACHE_PRECOMPILED must be 0/1/true/false, not 'maybe'"):
        settings.get("KCACHE_PRECOMPILED")
    assert settings.enabled("KCACHE_PRECOMPILED") is True


@pytest.mark.parametrize("value,off", [("true", True), (" YES ", True), ("1", True), ("0", False), ("", False)])
def test_kcache_disable_turns_the_python_routing_off_as_the_client(monkeypatch, value, off):
    from kcache.api.compiler import compile_settings

    monkeypatch.setenv("KCACHE_DISABLE", value)
    assert (compile_settings({}) is None) == off
    assert _core.config_from_env({"KCACHE_DISABLE": value})["disabled"] == off


def test_configure_leaves_os_environ_alone(monkeypatch, tmp_path):
    from kcache.state import store

    monkeypatch.setenv("KCACHE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("KCACHE_LOCAL_DIR", str(tmp_path))
    before = dict(os.environ)
    saved = store.current()
    try:
        kcache.configure(url="http://127.0.0.1:9", local_dir="none")
        assert dict(os.environ) == before
        config = store.get_store().config
        assert config["url"] == "http://127.0.0.1:9" and config["local_dir"] is None
        kcache.configure()  # the environment again
        assert store.get_store().config["url"] == "http://127.0.0.1:1"
    finally:
        store._store = saved


def test_the_client_docs_table_is_generated_from_the_declarations():
    text = (ROOT / "docs" / "client.md").read_text()
    assert settings.markdown() in text, "regenerate: python -m kcache.settings --markdown"
