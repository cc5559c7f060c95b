"""Part of the torch adaptor: importing Inductor's code cache for a warm job
without two packages that only AOTInductor packaging or PyTorch's own
remote caches use.

A warm job needs torch._inductor.codecache (its regions' loaders live
there). Its plain import took 0.14 s here, about two thirds of it in two
imports a loaded region never uses (issue 52;
bench/warmstart/code_cache_import.json and docs/precompiled.md, "What a
warm start still costs"):

- the redis client: Inductor's remote-cache module does `import redis`
  for PyTorch's own Redis caches, which a job on kcache does not use.
  While the code cache is imported, that module gets a lazy stand-in that
  imports the real package on first use (any attribute); the stand-in
  leaves sys.modules when the import ends, so the job's own `import
  redis` gets the real package.
- torch.export.pt2_archive's package body: the code cache imports two
  light submodules of it (`_package_weights`, `constants`), and importing
  a submodule runs the package's `__init__`, whose one line imports
  `_package`, the AOTInductor archive reader and writer, and with it
  torch.export's serializer and schema (hundreds of dataclasses). kcache
  imports the package lazily: the package module without its body, with
  a module `__getattr__` (PEP 562) that imports `_package` the first time
  one of the names the body would have bound is asked for. It is done
  only where the body is exactly such re-exports (read, not run), so a
  torch that puts anything else there gets the real import.

tests/python/compile/test_code_cache_import.py checks both against the real packages:
PyTorch's Redis cache put and get through the lazy client against a real
redis-server, and an AOTInductor archive written and read through the lazy
package.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib
import sys
import types
from typing import Any

CODE_CACHE = "torch._inductor.codecache"
PT2_ARCHIVE = "torch.export.pt2_archive"


class _LazyRedis(types.ModuleType):
    """The redis client package, imported on first use: what Inductor's
    remote-cache module binds while kcache imports Inductor's code cache."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if sys.modules.get("redis") is self:
            del sys.modules["redis"]
        real = importlib.import_module("redis")
        return getattr(real, name)


def import_code_cache() -> types.ModuleType:
    """torch._inductor.codecache, imported without the redis client and
    without torch.export.pt2_archive's package body (the module docstring
    says why and how)."""
    if CODE_CACHE in sys.modules:
        return sys.modules[CODE_CACHE]
    lazy_package(PT2_ARCHIVE)
    lazy = None
    if "redis" not in sys.modules and importlib.util.find_spec("redis") is not None:
        lazy = sys.modules["redis"] = _LazyRedis("redis", "kcache's lazy stand-in (kcache/_torch_adaptor_code_cache.py)")
        lazy.__dict__["__kcache_stand_in__"] = True
    try:
        return importlib.import_module(CODE_CACHE)
    finally:
        if lazy is not None and sys.modules.get("redis") is lazy:
            del sys.modules["redis"]


def _plain_body(source: str) -> tuple[dict[str, str], list[str] | None, str | None] | None:
    """A package body made only of `from .sub import a, b` lines, an
    `__all__` list and a docstring: ({name: submodule}, __all__, docstring);
    None for any other body (it must run for real)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names: dict[str, str] = {}
    listed, doc = None, None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module \
                and all(a.asname is None and a.name != "*" for a in node.names):
            names.update({a.name: node.module for a in node.names})
        elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"] \
                and isinstance(node.value, ast.List | ast.Tuple) \
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts):
            listed = [e.value for e in node.value.elts]
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            doc = node.value.value
        else:
            return None
    return (names, listed, doc) if names else None


def reexports(source: str) -> dict[str, str] | None:
    """{name: submodule} for a body of plain re-exports (_plain_body), else None."""
    body = _plain_body(source)
    return body[0] if body else None


def lazy_package(name: str) -> bool:
    """Puts package `name` in sys.modules without running its body, which
    must be plain re-exports (reexports()); the body's names are imported
    from their submodule on first use. False, doing nothing, where the
    package is imported already, its parent is not, or its body is
    anything else."""
    parent, _, child = name.rpartition(".")
    if name in sys.modules or (parent and parent not in sys.modules):
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or spec.submodule_search_locations is None:
        return False
    try:
        source = pathlib.Path(spec.origin).read_text()
    except OSError:
        return False
    body = _plain_body(source)
    if body is None:
        return False
    names, listed, doc = body
    module = importlib.util.module_from_spec(spec)
    if listed is not None:  # __all__ and the docstring, as the body would set them
        module.__all__ = listed
    if doc is not None:
        module.__doc__ = doc

    def __getattr__(attr: str) -> Any:
        sub = names.get(attr)
        if sub is None:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        real = importlib.import_module(f"{name}.{sub}")
        for n, s in names.items():
            if s == sub and n not in module.__dict__:
                setattr(module, n, getattr(real, n))
        return module.__dict__[attr]

    def __dir__() -> list[str]:
        return sorted(set(module.__dict__) | set(names))

    module.__getattr__ = __getattr__
    module.__dir__ = __dir__
    module.__dict__["__kcache_lazy__"] = True
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)
    return True
