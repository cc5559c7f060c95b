#!/usr/bin/env python3
"""Layering check for the Python package (compile/kcache), as
scripts/check_layers.py is for the C++ targets.

Every module belongs to a group: its subpackage (kcache.precompiled,
kcache.keys …) or, for a module at the top, itself. Groups sit on the
ranks of LAYERS, lowest first (docs/architecture.md, "The Python
package"). A module may import its own group and groups of lower ranks;
an import of a group of the same or a higher rank is reported, and so is
any cycle of imports between modules. Imports inside functions count (they
run too); imports under `if TYPE_CHECKING:` do not.

    python3 scripts/check_py_layers.py [PACKAGE_DIR]   # exit 1 and one line per violation
"""
from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "compile" / "kcache"

# Lowest first. A group may import only groups of a lower rank.
LAYERS: list[set[str]] = [
    {"_torch_adaptor", "_core"},           # PyTorch's internals; the C++ core
    {"settings", "state"},                 # KCACHE_* settings; counters, outcomes, the client
    {"keys"},                              # key fields and the one key function
    {"guards", "artifacts", "compat"},     # checks on live objects; bundles; state-dict keys
    {"background"},                        # cold start without waiting (the rank's side)
    {"traced", "precompiled", "aoti"},     # the paths a region takes
    {"api"},                               # compile_regions and friends
    {"accelerate", "tools"},               # Accelerate's shim; the prewarm commands
    {"prewarm", "aoti_prewarm", "__init__"},  # the commands' names; `import kcache`
]
# Modules that belong to another group than their name says.
GROUP_OF = {"_torch_adaptor_imports": "_torch_adaptor", "_torch_adaptor_code_cache": "_torch_adaptor"}


def rank_of(group: str) -> int | None:
    for i, layer in enumerate(LAYERS):
        if group in layer:
            return i
    return None


def module_name(path: pathlib.Path, package: pathlib.Path) -> str:
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["kcache", *parts])


def group_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return GROUP_OF.get(parts[1], parts[1])


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for n in ast.walk(sub):
                    if hasattr(n, "lineno"):
                        lines.add(n.lineno)
    return lines


def imports_of(path: pathlib.Path, module: str, modules: set[str]) -> list[tuple[int, str]]:
    """(line, imported kcache module) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    is_package = path.name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "kcache"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "kcache":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                found.append((node.lineno, sub if sub in modules else target))
    return found


def check(package: pathlib.Path = PACKAGE) -> list[str]:
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    modules = set(files) | {"kcache._core"}
    problems: list[str] = []
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        mine = group_of(module)
        if rank_of(mine) is None:
            problems.append(f"{path.relative_to(package.parent)}: group {mine!r} is on no layer "
                            "(add it to LAYERS in scripts/check_py_layers.py and docs/architecture.md)")
            continue
        for line, target in imports_of(path, module, modules):
            theirs = group_of(target)
            graph[module].add(target)
            if theirs == mine:
                continue
            r_mine, r_theirs = rank_of(mine), rank_of(theirs)
            if r_theirs is None or r_theirs >= r_mine:
                how = "a peer" if r_theirs == r_mine else "a higher layer"
                problems.append(f"{path.relative_to(package.parent)}:{line}: {module} ({mine}) imports "
                                f"{target} ({theirs}), {how}")
    problems += [f"import cycle among: {', '.join(c)}" for c in cycles(graph)]
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a
    module importing itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main(argv: list[str]) -> int:
    package = pathlib.Path(argv[1]) if len(argv) > 1 else PACKAGE
    problems = check(package)
    for p in problems:
        print(p)
    if not problems:
        print(f"check_py_layers: {sum(1 for _ in package.rglob('*.py'))} modules, no upward import, no cycle")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
