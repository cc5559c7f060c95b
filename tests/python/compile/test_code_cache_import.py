"""Inductor's code cache as kcache imports it for a warm job
(kcache/_torch_adaptor_code_cache.py): without the redis client and without
torch.export.pt2_archive's package body, each checked against the real
package of the pinned torch. Each check runs in a fresh process, since this
one may have imported them already."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from kc_testing import PYTHON, python_env
from harness.jobs import run_job


def run(code: str) -> dict:
    out = run_job([PYTHON, "-c", textwrap.dedent(code)], timeout=300, env=python_env())
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_code_cache_comes_without_the_archive_package_body_and_archives_still_work(tmp_path):
    # The code cache imports two light submodules of torch.export.pt2_archive;
    # the package body (AOTInductor's archive reader and writer, torch.export's
    # serializer) is imported only when one of its names is asked for, and
    # then those names are the real objects: an archive written and read here.
    r = run(f"""
        import json, sys
        import torch
        from kcache import _torch_adaptor_code_cache as C

        C.import_code_cache()
        import torch.export.pt2_archive as pkg
        after_import = [m for m in ("torch.export.pt2_archive._package", "torch._export.serde.schema",
                                    "torch._export.serde.serialize") if m in sys.modules]
        lazy = pkg.__dict__.get("__kcache_lazy__") is True
        listed = sorted(pkg.__all__) == ["PT2ArchiveReader", "PT2ArchiveWriter", "is_pt2_package"]
        in_dir = all(n in dir(pkg) for n in pkg.__all__)
        try:
            pkg.no_such_name
            unknown = "no error"
        except AttributeError as e:
            unknown = "AttributeError"
        from torch.export.pt2_archive import PT2ArchiveReader, PT2ArchiveWriter, is_pt2_package
        from torch.export.pt2_archive import _package as real
        same = (PT2ArchiveWriter is real.PT2ArchiveWriter and PT2ArchiveReader is real.PT2ArchiveReader
                and is_pt2_package is real.is_pt2_package and pkg.PT2ArchiveWriter is real.PT2ArchiveWriter)
        path = {str(tmp_path / "a.pt2")!r}
        with PT2ArchiveWriter(path) as w:
            w.write_string("kcache/hello.txt", "hello")
        with PT2ArchiveReader(path) as r:
            back = r.read_string("kcache/hello.txt")
        print(json.dumps({{"after_import": after_import, "lazy": lazy, "listed": listed, "in_dir": in_dir,
                          "unknown": unknown, "same": same, "back": back,
                          "is_package": is_pt2_package(path)}}))
        """)
    assert r["after_import"] == [], r
    assert r["lazy"] and r["listed"] and r["in_dir"], r
    assert r["unknown"] == "AttributeError"
    assert r["same"] and r["back"] == "hello" and r["is_package"], r


def test_the_pinned_torchs_archive_package_body_is_plain_reexports():
    # Drift: a torch whose package body does more than re-export gets the
    # real import (correct, 0.07 s slower here); this says so loudly.
    import importlib.util
    import pathlib

    from kcache import _torch_adaptor_code_cache as C

    spec = importlib.util.find_spec(C.PT2_ARCHIVE)
    names = C.reexports(pathlib.Path(spec.origin).read_text())
    assert names == {"is_pt2_package": "_package", "PT2ArchiveReader": "_package",
                     "PT2ArchiveWriter": "_package"}


BODIES = {
    # body -> whether it may be imported lazily
    "from ._impl import a, b\n__all__ = ['a', 'b']\n": True,
    '"""doc"""\nfrom ._impl import a\nfrom ._other import c\n': True,
    "from ._impl import a\nSIDE = print('ran')\n": False,
    "from ._impl import a as b\n": False,
    "from ._impl import *\n": False,
    "from impl import a\n": False,
    "import os\nfrom ._impl import a\n": False,
    "from ._impl import a\n__all__ = [name for name in ('a',)]\n": False,
    "from ._impl import a\nif True:\n    pass\n": False,
    "": False,
    "def (:\n": False,
}


@pytest.mark.parametrize("body", sorted(BODIES))
def test_only_a_body_of_plain_reexports_is_imported_lazily(tmp_path, monkeypatch, body):
    # A package whose body does anything else runs it for real; a lazy one
    # gives the submodules' own objects and its submodules import as usual.
    pkg = tmp_path / "kc_lazy_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(body)
    (pkg / "_impl.py").write_text("a = object()\nb = [1]\n")
    (pkg / "_other.py").write_text("c = 'c'\n")
    (pkg / "plain.py").write_text("d = 4\n")
    r = run(f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        from kcache import _torch_adaptor_code_cache as C
        made = C.lazy_package("kc_lazy_pkg")
        out = {{"made": made}}
        if made:
            import kc_lazy_pkg
            out["impl_before"] = "kc_lazy_pkg._impl" in sys.modules
            from kc_lazy_pkg import plain
            out["plain"] = plain.d
            from kc_lazy_pkg import a
            from kc_lazy_pkg import _impl
            out["same"] = a is _impl.a
            out["all"] = getattr(kc_lazy_pkg, "__all__", None)
            out["again"] = C.lazy_package("kc_lazy_pkg")
        print(json.dumps(out))
        """)
    assert r["made"] is BODIES[body], r
    if r["made"]:
        assert r["impl_before"] is False and r["plain"] == 4 and r["same"] is True, r
        assert r["again"] is False
        if "__all__" in body:
            assert r["all"] == ["a", "b"]


def test_the_code_cache_comes_without_redis_and_pytorchs_redis_cache_still_works(tmp_path):
    # kcache imports Inductor's code cache (a warm job needs it) without the
    # redis client its remote-cache module imports; that module gets a lazy
    # stand-in, and PyTorch's own Redis cache still works through it, here
    # against a real redis-server. The user's own `import redis` is the real one.
    import shutil
    import socket

    pytest.importorskip("redis")
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (scripts/setup.sh installs it)"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    redis = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        r = run(f"""
            import json, os, sys, time
            import torch
            from kcache import _torch_adaptor_code_cache as L

            codecache = L.import_code_cache()
            from torch._inductor import remote_cache
            after_import = "redis" in sys.modules
            stand_in = remote_cache.redis.__dict__.get("__kcache_stand_in__") is True
            again = L.import_code_cache() is codecache
            os.environ.update(TORCHINDUCTOR_REDIS_HOST="127.0.0.1", TORCHINDUCTOR_REDIS_PORT="{port}")
            backend = remote_cache.RedisRemoteCacheBackend("kcache-test")
            for _ in range(100):  # redis-server starting
                try:
                    backend._redis.ping()
                    break
                except Exception:
                    time.sleep(0.1)
            backend._put("k", b"v")
            got = backend._get("k")
            import redis
            print(json.dumps({{
                "after_import": after_import, "stand_in": stand_in, "again": again,
                "got": got.decode() if got else None, "user_real": "__kcache_stand_in__" not in redis.__dict__,
                "same_class": remote_cache.redis.Redis is redis.Redis,
                "same_error": remote_cache.redis.exceptions.ConnectionError is redis.exceptions.ConnectionError,
            }}))
            """)
    finally:
        redis.terminate()
        redis.wait(10)
    assert r["after_import"] is False and r["stand_in"] is True and r["again"] is True
    assert r["got"] == "v"
    assert r["user_real"] and r["same_class"] and r["same_error"]
