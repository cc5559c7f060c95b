#!/usr/bin/env python3
"""A module-level name bound twice in a Python file: an import, then a
function, class or another import of the same name.

The second binding silently wins, and every call meant for the first
reaches the second (clean-clone-40's four failures: two test modules that
imported harness.jobs' `run_job` and defined a `run_job` of their own).
pyflakes says so too, among some 170 other remarks this tree keeps on
purpose (fixtures imported for pytest); this check says only this, so
that it can fail the test command.

    python3 scripts/check_py_names.py [DIR ...]   # exit 1 and one line per name bound twice
"""
from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIRS = ["compile", "tests", "examples", "scripts", "bench", "docker", "fuzz"]


def imported_names(node: ast.stmt) -> dict[str, str]:
    """name -> what it names, for each name an import statement binds
    (`import a.b` binds `a`, the package a, as `import a` does)."""
    if isinstance(node, ast.Import):
        return {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom):
        return {a.asname or a.name: f"{'.' * node.level}{node.module or ''}:{a.name}"
                for a in node.names if a.name != "*"}
    return {}


def twice(tree: ast.Module) -> list[tuple[int, str, int]]:
    """(line, name, line of the import it replaces) for each top-level
    function, class or import that rebinds a name a top-level import bound
    to something else. Imports inside `try:` or `if` blocks (a fallback
    chosen at run time) are left alone."""
    imports: dict[str, tuple[int, str]] = {}
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in imports:
            out.append((node.lineno, node.name, imports[node.name][0]))
        for name, what in imported_names(node).items():
            if name in imports and imports[name][1] != what:
                out.append((node.lineno, name, imports[name][0]))
            imports[name] = (node.lineno, what)
    return out


def main(argv: list[str]) -> int:
    dirs = [pathlib.Path(a) for a in argv] or [ROOT / d for d in DIRS]
    bad = 0
    files = 0
    for d in dirs:
        for path in sorted(d.rglob("*.py")):
            if any(part.startswith(".") or part in ("build", "__pycache__") for part in path.parts):
                continue
            files += 1
            try:
                tree = ast.parse(path.read_text(), str(path))
            except SyntaxError as e:
                print(f"{path}:{e.lineno}: does not parse: {e.msg}")
                bad += 1
                continue
            for line, name, first in twice(tree):
                print(f"{path}:{line}: '{name}' replaces the import of line {first}")
                bad += 1
    if bad == 0:
        print(f"check_py_names: {files} files, no module-level name bound twice")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
