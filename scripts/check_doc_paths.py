#!/usr/bin/env python3
"""Every repository path the docs name must exist.

    python3 scripts/check_doc_paths.py [FILE.md ...]     (default: README.md docs/*.md)

Checks, in each file:
- markdown links `[text](target)` that are not URLs or anchors: the target,
  relative to the file's folder or to the repository root;
- repository paths written in prose or in backticks: a word that starts
  with a top-level folder of the repository (`docs/keys.md`,
  `bench/warmstart/REPORT.md`, `tests/python/compile/`), `{a,b}` expanded and
  `*` globbed;
- bare file names that end in a source or result extension
  (`test_cold_warm.py`, `results.json`): some tracked file must have that
  name.
Build outputs (`build/...`, `.venv/...`) and paths in fenced code blocks are
not checked. Prints each broken path with its file and line; exits 1 if any.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = sorted(d for d in os.listdir(ROOT)
             if os.path.isdir(os.path.join(ROOT, d)) and not d.startswith(".") and d != "build")
TOP += [".ci"]
SKIP_PREFIXES = ("build/", ".venv", "/")
# Names the docs use that are not this repository's files: other projects'
# files (Accelerate's, DeepSpeed's, PyTorch's), state-dict key names, files
# made at run time or by the operator.
NOT_OURS = {
    "tests/test_compile.py", "partitioned_param_coordinator.py",
    "transformer.h", "compiled.transformer.h", "model.transformer.h",
    "misses.jsonl", "docker/secrets/",
    "guards.py", "pgo.py", "cpp_builder.py", "eval_frame.py", "autograd_cache.py",
    "inductor.cpp",  # a config entry's prefix (inductor.cpp.cxx) (docs/keys.md, "Compiler configuration")
    "codecache.py", "compile_fx.py",
}
EXT = r"(?:py|md|cpp|hpp|h|json|jsonl|log|sh|txt|xml|png|toml|lua|cmake)"

PATH_RE = re.compile(r"(?<![\w./~$-])((?:%s)/[\w./{},*+-]*)" % "|".join(map(re.escape, TOP)))
ROOT_FILE_RE = re.compile(r"(?<![\w./-])(README\.md|CMakeLists\.txt|pyproject\.toml)(?![\w/])")
BARE_RE = re.compile(r"(?<![\w./{}-])([A-Za-z0-9_][\w-]*(?:\.[\w-]+)*\.%s)(?![\w/])" % EXT)
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


def tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return set(out.split())


def expand(p: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    return [q for alt in m.group(1).split(",") for q in expand(p[:m.start()] + alt + p[m.end():])]


def exists(p: str, base: str) -> bool:
    for cand in (os.path.join(ROOT, p), os.path.join(base, p)):
        if "*" in cand:
            if glob.glob(cand):
                return True
        elif os.path.exists(cand):
            return True
    return False


def check(path: str, names: set[str]) -> list[str]:
    bad = []
    base = os.path.dirname(os.path.join(ROOT, path))
    fenced = False
    for n, line in enumerate(open(os.path.join(ROOT, path), encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):  # code: commands, not citations
            continue
        for target in LINK_RE.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            t = target.split("#")[0]
            if t and not exists(t, base):
                bad.append(f"{path}:{n}: link {target}")
        for raw in PATH_RE.findall(line) + ROOT_FILE_RE.findall(line):
            p = raw.rstrip(".,;:)'\"`")
            if p.endswith("..."):
                p = p[:-3]
            if p.startswith(SKIP_PREFIXES) or not p or p in NOT_OURS:
                continue
            for q in expand(p):
                if not exists(q.rstrip("/") or q, base):
                    bad.append(f"{path}:{n}: path {q}")
        for name in BARE_RE.findall(PATH_RE.sub(" ", line)):
            if name not in names and name not in NOT_OURS and not exists(name, base):
                bad.append(f"{path}:{n}: file name {name} (no tracked file has it)")
    return bad


def main() -> int:
    files = sys.argv[1:] or ["README.md"] + sorted(glob.glob("docs/*.md", root_dir=ROOT))
    everything = tracked()
    names = {os.path.basename(f) for f in everything}
    bad = [b for f in files for b in check(f, names)]
    for b in bad:
        print(b)
    print(f"{len(bad)} broken path(s) in {len(files)} file(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
