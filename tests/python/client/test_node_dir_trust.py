"""The node tier lives only in a directory that is the user's own: never a
shared temp directory another local user could create first (plant
bundles, point the miss log elsewhere), never a directory others can
write. Each case is a fresh process with its own environment."""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import subprocess
import sys

JOB = r"""
import json, secrets, sys
from kcache import _core
key = secrets.token_hex(32)
manifest = {"key": key, "label": "x", "compile_seconds": 0.1,
            "producer": {"host": "t", "pid": 1, "time": 0, "kcache": "0.1.0"}}
bundle = _core.write_bundle(json.dumps(manifest), [("mega_cache", b"m" * 64)])
client = _core.Client.from_env()
client.put(key, bundle)
print(json.dumps({"key": key, "back": client.get(key) == bundle}))
"""


def run(env: dict) -> tuple[dict, str]:
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("KCACHE_") and k not in ("HOME", "XDG_CACHE_HOME")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, env=full,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def objects(root: pathlib.Path) -> list[pathlib.Path]:
    return [p for p in (root / "objects").rglob("*") if p.is_file()] if root.exists() else []


def test_an_own_private_directory_is_used(tmp_path):
    node = tmp_path / "node"
    result, _ = run({"KCACHE_LOCAL_DIR": str(node)})
    assert result["back"] and len(objects(node)) == 1  # positive control
    assert (node.stat().st_mode & 0o777) == 0o700  # created private


def test_a_directory_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    result, err = run({"KCACHE_LOCAL_DIR": str(shared)})
    assert "node tier off" in err and "writable by others" in err
    assert not result["back"] and objects(shared) == []


def test_a_directory_of_another_user_is_refused(tmp_path):
    if os.getuid() != 0:
        import pytest
        pytest.skip("needs root to give a directory to another user")  # CI runs as root
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    result, err = run({"KCACHE_LOCAL_DIR": str(theirs)})
    assert "node tier off" in err and "belongs to another user" in err
    assert objects(theirs) == []


def test_no_home_never_falls_back_to_a_shared_temp_dir(tmp_path):
    # Before: /tmp/kcache-<uid>, which any local user could create first.
    planted = pathlib.Path(f"/tmp/kcache-{os.getuid()}")
    existed = planted.exists()
    result, err = run({})  # neither HOME nor XDG_CACHE_HOME
    if not existed:
        assert not planted.exists()
    import pwd
    home = pwd.getpwuid(os.getuid()).pw_dir
    assert result["back"]  # the user's home from the password database
    assert (pathlib.Path(home) / ".cache" / "kcache" / "objects").exists()
