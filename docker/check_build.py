#!/usr/bin/env python3
"""Builds kcache-server and kcache from exactly what docker/Dockerfile's build
stage COPYs, so that a C++ layer added without its COPY fails the test
command (scripts/test.sh, stage "docker"), not only docker/smoke.sh.

  docker/check_build.py              # the build, then docker/check_compose.py
  docker/check_build.py --control    # also: without each COPY the build fails
  docker/check_build.py --drop redis # plant a missing COPY (must fail)

The COPY sources are read from the Dockerfile (not listed here) and copied
as a fresh clone holds them (git's tracked and unignored files) into a
temporary folder; cmake runs with the Dockerfile's -D options and builds its
--target list. Two things differ from the image build, both for speed: the
build type is scripts/build.sh's (RelWithDebInfo, warnings as errors) and
the build folder sits where scripts/build.sh's does (build/dev), so ccache
answers from that build's objects (CCACHE_BASEDIR makes the paths
relative). What it does not cover, docker/smoke.sh does: the Debian package
names, the Release flags, the runtime stage's libraries, the image's user,
volume and health check at run time (docs/operations.md "Docker").
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dockerfile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "docker" / "Dockerfile"
BUILD_SUBDIR = Path("build/dev")  # scripts/build.sh's, for ccache's relative paths


def tracked_files(source: str) -> list[Path]:
    """The files under `source` that a fresh clone (plus new, unignored
    files) holds."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "--", source],
                         cwd=ROOT, check=True, capture_output=True).stdout
    return [Path(p) for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def populate(context: Path, copies: list[tuple[list[str], str]], drop: set[str]) -> None:
    """Lays the COPY sources out in `context` as the build stage sees them
    under its WORKDIR."""
    for sources, dest in copies:
        for source in sources:
            if source in drop:
                continue
            files = tracked_files(source)
            if not files:
                raise SystemExit(f"docker/Dockerfile: COPY {source} {dest}: nothing in the checkout")
            for f in files:
                if (ROOT / source).is_dir():
                    target = context / dest / f.relative_to(source)
                elif dest.endswith("/"):
                    target = context / dest / f.name
                else:
                    target = context / dest
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, target)


def build(work: Path, drop: set[str], jobs: int) -> tuple[bool, str]:
    stages = dockerfile.parse(DOCKERFILE)
    build_stage = dockerfile.stage(stages, "build")
    defines, targets = build_stage.cmake_build()
    defines = [d for d in defines if not d.startswith(("-DCMAKE_BUILD_TYPE=", "-DKCACHE_WERROR="))]
    context = work / "src"
    if context.exists():
        shutil.rmtree(context)
    context.mkdir(parents=True)
    populate(context, build_stage.copies(), drop)
    env = dict(os.environ, CCACHE_BASEDIR=str(context), CCACHE_NOHASHDIR="1")
    build_dir = context / BUILD_SUBDIR
    steps = [["cmake", "-S", str(context), "-B", str(build_dir), "-G", "Ninja",
              "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DKCACHE_WERROR=ON", *defines],
             ["ninja", "-C", str(build_dir), f"-j{jobs}", *targets]]
    log = []
    for step in steps:
        r = subprocess.run(step, cwd=context, env=env, capture_output=True, text=True)
        log.append(f"$ {' '.join(step)}\n{r.stdout}{r.stderr}")
        if r.returncode != 0:
            return False, "\n".join(log)
    for t in targets:
        found = list(build_dir.rglob(t))
        if not any(p.is_file() and os.access(p, os.X_OK) for p in found):
            return False, "\n".join(log) + f"\nno executable {t} built"
    return True, "\n".join(log)


def first_error(log: str) -> str:
    """The line that says why the build failed (the compiler's or cmake's)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.startswith("$ ")]
    for pattern in ("fatal error", "CMake Error", "ninja: error", "error:"):
        for i, line in enumerate(lines):
            if pattern in line:
                more = lines[i + 1] if pattern == "CMake Error" and i + 1 < len(lines) else ""
                return (line + " " + more).strip()[:200]
    return lines[-1][:200] if lines else "(no output)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drop", action="append", default=[], help="leave this COPY source out (must fail)")
    ap.add_argument("--control", action="store_true",
                    help="after a passing build, build once without each COPY'd layer: each must fail")
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")))
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="kcache-docker-build-"))
    try:
        t0 = time.monotonic()
        ok, log = build(work, set(a.drop), a.jobs)
        if a.drop:
            if ok:
                print(f"docker build check: FAIL: built without COPY {', '.join(a.drop)}")
                return 1
            print(f"docker build check: without COPY {', '.join(a.drop)} the build fails, as it must: "
                  f"{first_error(log)}")
            return 0
        if not ok:
            print(log[-6000:])
            print("docker build check: FAIL: kcache-server and kcache do not build from the Dockerfile's COPYs")
            return 1
        server = next(p for p in (work / "src" / BUILD_SUBDIR).rglob("kcache-server") if p.is_file())
        print(f"docker build check: kcache-server and kcache built from the Dockerfile's COPYs "
              f"in {time.monotonic() - t0:.0f} s")
        r = subprocess.run([sys.executable, str(ROOT / "docker" / "check_compose.py"), "--server", str(server)]
                           + (["--control"] if a.control else []))
        if r.returncode != 0:
            return r.returncode
        if a.control:
            stages = dockerfile.parse(DOCKERFILE)
            layers = [s for sources, _ in dockerfile.stage(stages, "build").copies() for s in sources]
            for layer in layers:
                t1 = time.monotonic()
                ok, log = build(work, {layer}, a.jobs)
                if ok:
                    print(f"docker build check: FAIL (control): built without COPY {layer}: "
                          "a COPY the image does not need, or a check that cannot tell one missing")
                    return 1
                print(f"docker build check: control: without COPY {layer} it fails "
                      f"({time.monotonic() - t1:.0f} s): {first_error(log)}")
        return 0
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
