#!/usr/bin/env python3
"""Layering check: every C++ file includes only headers of its own target or
of a target it links (directly or through PUBLIC links).

CMake puts the project root on every target's include path, so the compiler
alone would let any file include any header; this check is what makes a
target's link line its contract (docs/architecture.md, "Layers"). It reads
the targets from the CMakeLists.txt files themselves (add_library /
add_executable source lists, target_link_libraries of kcache_* targets), so
it needs no second list to keep in step.

A header belongs to the target that compiles the .cpp of the same name;
otherwise to the target that compiles most sources in its folder; HEADER_HOME
names the few headers that rule gets wrong (header-only files that sit in a
folder above the target that uses them).

    python3 scripts/check_layers.py        # exit 1 and one line per violation
"""
from __future__ import annotations

import pathlib
import re
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYERS = ["common", "keys", "artifact", "redis", "storage", "server", "client", "cli"]

# Header-only files whose folder-majority owner is wrong: they are used by
# a target below the one whose sources share their folder. Empty while every
# such header sits in its own target's folder (as server/http_front/
# client_watch.hpp, for kcache_http_front); prefer moving a header to
# adding it here.
HEADER_HOME: dict[str, str] = {}

_TARGET = re.compile(r"add_(?:library|executable)\(\s*([\w-]+)\s+(?:STATIC\s+|SHARED\s+)?([^)]*)\)", re.S)
_LINKS = re.compile(r"target_link_libraries\(\s*([\w-]+)\s+([^)]*)\)", re.S)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_targets() -> tuple[dict[str, str], dict[str, set[str]]]:
    """(file -> target, target -> kcache targets it links)."""
    owner: dict[str, str] = {}
    links: dict[str, set[str]] = {}
    for layer in LAYERS:
        cml = ROOT / layer / "CMakeLists.txt"
        if not cml.exists():
            continue
        text = re.sub(r"#.*", "", cml.read_text())
        for name, body in _TARGET.findall(text):
            links.setdefault(name, set())
            for src in body.split():
                # Generated sources (a ${CMAKE_CURRENT_BINARY_DIR} path, as
                # server/ui's page) are not in the tree to read.
                if src.endswith(".cpp") and "${" not in src:
                    owner[f"{layer}/{src}"] = name
        for name, body in _LINKS.findall(text):
            links.setdefault(name, set()).update(w for w in body.split() if w.startswith("kcache_"))
    return owner, links


def header_owner(owner: dict[str, str]) -> dict[str, str]:
    by_folder: dict[str, Counter] = {}
    for src, target in owner.items():
        by_folder.setdefault(str(pathlib.PurePosixPath(src).parent), Counter())[target] += 1
    homes: dict[str, str] = {}
    for layer in LAYERS:
        for h in (ROOT / layer).rglob("*.hpp"):
            rel = h.relative_to(ROOT).as_posix()
            if rel in HEADER_HOME:
                homes[rel] = HEADER_HOME[rel]
            elif rel[:-4] + ".cpp" in owner:
                homes[rel] = owner[rel[:-4] + ".cpp"]
            else:
                folder = str(pathlib.PurePosixPath(rel).parent)
                while folder not in by_folder and "/" in folder:
                    folder = folder.rsplit("/", 1)[0]
                if folder in by_folder:
                    homes[rel] = by_folder[folder].most_common(1)[0][0]
    return homes


def closure(target: str, links: dict[str, set[str]]) -> set[str]:
    seen, todo = {target}, [target]
    while todo:
        for dep in links.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def violations() -> list[str]:
    owner, links = read_targets()
    homes = {**header_owner(owner), **owner}
    out = []
    for rel, target in sorted(homes.items()):
        reach = closure(target, links)
        for inc in _INCLUDE.findall((ROOT / rel).read_text()):
            home = homes.get(inc)
            if home is None:
                if (ROOT / inc).exists() and inc.split("/")[0] in LAYERS:
                    out.append(f"{rel} ({target}) includes {inc}, which no target owns")
                continue
            if home not in reach:
                out.append(f"{rel} ({target}) includes {inc} ({home}), which {target} does not link")
    return out


def main() -> int:
    bad = violations()
    for line in bad:
        print("layering:", line)
    if not bad:
        owner, links = read_targets()
        print(f"layering: {len(owner)} sources in {len(links)} targets include only what they link")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
