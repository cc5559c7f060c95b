#!/usr/bin/env python3
"""The test command's closing count: passed, failed and skipped tests from
the JUnit files of ctest and pytest, every skip with its reason.

A skip is allowed only when it is listed below, and docs/STATUS.md ("The
test command") names each of these; any other skip means something STATUS
calls tested did not run, and fails the run (with --gate).

    scripts/test_summary.py [--gate] [--quiet] [--slowest N] build/junit-*.xml

--slowest N lists the N slowest test cases of all the files (junit's time
attribute: a pytest case's setup, call and teardown; a ctest case's run),
so the test command's end shows where its time went.
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET

# (test-name pattern, why it may skip, when) — keep in step with docs/STATUS.md.
ALLOWED = [
    (r"CorruptObjectIsNeverServed/memory", "memory storage keeps no stored form to corrupt",
     lambda: True),
    (r"ReadRangeOfATruncatedObjectIsCorrupt/memory", "memory storage keeps no stored form to truncate",
     lambda: True),
    (r"FullFilesystem|tmpfs|DiskFull", "mounting a tmpfs needs root or CAP_SYS_ADMIN",
     lambda: os.geteuid() != 0),
    (r"test_a_directory_of_another_user_is_refused", "giving a directory away needs root",
     lambda: os.geteuid() != 0),
]


def _reason(case: ET.Element, skipped: ET.Element | None) -> str:
    message = "" if skipped is None else (skipped.get("message") or skipped.text or "").strip()
    if message and message != "SKIP_REGULAR_EXPRESSION_MATCHED":  # ctest's own word for a GTEST_SKIP
        return message.splitlines()[0]
    out = case.findtext("system-out") or ""
    m = re.search(r"Skipped\s*\n(.+)", out) or re.search(r"SKIPPED \](.*)", out)
    return m.group(1).strip() if m else "(no reason given)"


def _cases(paths: list[str]):
    """(file, test name, testcase element) of every case in the files that exist."""
    for path in paths:
        if not os.path.exists(path):
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            cls, test = case.get("classname", ""), case.get("name", "")
            yield path, (test if cls in ("", test) else f"{cls}::{test}"), case


def durations(paths: list[str]) -> list[tuple[float, str, str]]:
    """(seconds, file, test) of every test case, slowest first."""
    out = []
    for path, name, case in _cases(paths):
        try:
            seconds = float(case.get("time") or 0)
        except ValueError:
            seconds = 0.0
        out.append((seconds, os.path.basename(path), name))
    return sorted(out, key=lambda t: -t[0])


def read(paths: list[str]) -> tuple[int, list[str], list[tuple[str, str]]]:
    passed, failed, skipped = 0, [], []
    for _, name, case in _cases(paths):
        skip = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None \
                or case.get("status") == "fail":
            failed.append(name)
        elif skip is not None or case.get("status") in ("notrun", "disabled"):
            skipped.append((name, _reason(case, skip)))
        else:
            passed += 1
    return passed, failed, skipped


def main(argv: list[str]) -> int:
    gate = "--gate" in argv
    quiet = "--quiet" in argv  # only the verdict (the listing comes at the very end)
    slowest = 0
    if "--slowest" in argv:
        i = argv.index("--slowest")
        slowest = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    paths = [a for a in argv if not a.startswith("--")]
    passed, failed, skipped = read(paths)
    say = (lambda *a: None) if quiet else print
    say(f"=== tests: {passed} passed, {len(failed)} failed, {len(skipped)} skipped "
          f"(from {', '.join(os.path.basename(p) for p in paths if os.path.exists(p))})")
    for name in failed:
        say(f"  FAILED  {name}")
    bad = []
    for name, reason in skipped:
        allowed = [why for pat, why, when in ALLOWED if re.search(pat, name) and when()]
        say(f"  skipped {name}: {reason}" + ("" if allowed else "  <- not an allowed skip"))
        if not allowed:
            bad.append(name)
    if slowest:
        rows = durations(paths)[:slowest]
        say(f"=== the {len(rows)} slowest tests")
        for seconds, source, name in rows:
            say(f"  {seconds:7.1f} s  {name}  ({source})")
    if gate and bad:
        print(f"=== {len(bad)} test(s) skipped that docs/STATUS.md counts as tested: {', '.join(bad)}")
        return 1
    return 1 if gate and failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
