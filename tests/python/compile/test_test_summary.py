"""scripts/test_summary.py: the test command's closing count, and its gate
on skips that docs/STATUS.md does not name."""

from __future__ import annotations

import subprocess
import sys

from kc_testing import REPO

CTEST = """<?xml version="1.0"?><testsuite>
<testcase name="Backends/StorageConformance.CorruptObjectIsNeverServed/memory" classname="x" status="notrun">
<skipped message="memory keeps no stored form to corrupt"/></testcase>
<testcase name="Resp.Parse" classname="x" status="run"/>
</testsuite>"""
PYTEST = """<?xml version="1.0"?><testsuites><testsuite>
<testcase classname="tests.python.test_a" name="test_ok"/>
<testcase classname="tests.python.test_a" name="test_gone"><skipped message="redis-server not installed"/></testcase>
</testsuite></testsuites>"""


def run(tmp_path, *args, pytest_xml=PYTEST):
    (tmp_path / "c.xml").write_text(CTEST)
    (tmp_path / "p.xml").write_text(pytest_xml)
    return subprocess.run([sys.executable, str(REPO / "scripts" / "test_summary.py"), *args,
                           str(tmp_path / "c.xml"), str(tmp_path / "p.xml"),
                           str(tmp_path / "absent.xml")], capture_output=True, text=True)


def test_counts_and_reasons(tmp_path):
    out = run(tmp_path)
    assert out.returncode == 0
    assert "2 passed, 0 failed, 2 skipped" in out.stdout
    assert "memory keeps no stored form to corrupt" in out.stdout
    assert "test_gone: redis-server not installed  <- not an allowed skip" in out.stdout


def test_an_unnamed_skip_fails_the_gate_and_an_allowed_one_does_not(tmp_path):
    out = run(tmp_path, "--gate")
    assert out.returncode == 1 and "test_gone" in out.stdout
    only_allowed = PYTEST.replace('<skipped message="redis-server not installed"/>', "")
    assert run(tmp_path, "--gate", pytest_xml=only_allowed).returncode == 0
    failing = PYTEST.replace('name="test_ok"/>', 'name="test_ok"><failure message="x"/></testcase>')
    out = run(tmp_path, "--gate", pytest_xml=failing.replace('<skipped message="redis-server not installed"/>', ""))
    assert out.returncode == 1 and "FAILED  tests.python.test_a::test_ok" in out.stdout


def test_slowest_lists_the_slowest_cases_of_all_files_in_order(tmp_path):
    timed = PYTEST.replace('name="test_ok"/>', 'name="test_ok" time="12.5"/>').replace(
        'name="test_gone">', 'name="test_gone" time="3.25">')
    out = run(tmp_path, "--slowest", "2", pytest_xml=timed)
    assert out.returncode == 0
    lines = out.stdout.split("=== the 2 slowest tests\n", 1)[1].splitlines()
    assert lines[0].split() == ["12.5", "s", "tests.python.test_a::test_ok", "(p.xml)"]
    assert lines[1].split()[:3] == ["3.2", "s", "tests.python.test_a::test_gone"]
    assert len(lines) == 2
