"""`kcache stats` and `kcache verify` on a terminal (a pty): the table is
aligned and verify's progress line is drawn, then erased, leaving clean
lines behind."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time

from cli_harness import (
    CLI_BIN, EXIT_OK, make_artifact, requires_binaries, value_column,
    server,  # noqa: F401 — the fixture
)

pytestmark = requires_binaries

ERASE_LINE = "\x1b[2K"


def run_on_pty(*args: str, url: str) -> tuple[int, str]:
    """Runs kcache with stdout and stderr on one pty; returns (exit, raw output)."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCACHE_")}
    env.update(KCACHE_URL=url, TERM="xterm")
    proc = subprocess.Popen([str(CLI_BIN), *args], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the pty
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=5), b"".join(chunks).decode()


def render(raw: str) -> list[str]:
    """The screen lines a terminal shows: honours \\r, \\n and erase-line."""
    lines, line, col = [], [], 0
    i = 0
    while i < len(raw):
        if raw.startswith(ERASE_LINE, i):
            line, i = [" "] * col, i + len(ERASE_LINE)
            continue
        c = raw[i]
        i += 1
        if c == "\r":
            col = 0
        elif c == "\n":
            lines.append("".join(line).rstrip())
            line, col = [], 0
        else:
            assert c != "\x1b", f"unexpected escape in {raw!r}"
            line[col:col + 1] = [c]
            line += [" "] * (col + 1 - len(line))
            col += 1
    if "".join(line).strip():
        lines.append("".join(line).rstrip())
    return lines


def test_stats_on_a_terminal(server):
    server.put(make_artifact())
    code, raw = run_on_pty("stats", url=server.url)
    assert code == EXIT_OK, raw
    screen = render(raw)
    block = screen[:screen.index("")]
    assert len(block) >= 20 and len(value_column(block)) == 1, screen
    assert "\x1b" not in raw  # no spinner or colours for stats
    target = screen[screen.index("by target") + 1:]
    header = target[0]
    assert header.split() == ["TARGET", "ENTRIES", "BYTES", "HITS", "UPLOADS"]
    row = target[1]
    for word in ("ENTRIES", "BYTES", "HITS", "UPLOADS"):  # numbers end under their header's end
        end = header.index(word) + len(word)
        assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (header, row)


def test_verify_progress_ends_cleanly(server):
    for _ in range(20):
        server.put(make_artifact(payload=os.urandom(64 * 1024)))
    bad = server.put(make_artifact())
    obj = server.object_path(bad.key)
    data = bytearray(obj.read_bytes())
    data[60] ^= 0xFF
    obj.write_bytes(bytes(data))

    code, raw = run_on_pty("verify", "--remove", url=server.url)
    assert code == EXIT_OK, raw
    # The spinner was drawn (frame, label, elapsed) and then erased.
    assert re.search(r"[|/\\-] verifying \(and removing corrupt\) stored objects on http://\S+ \d", raw), raw
    assert ERASE_LINE in raw
    screen = render(raw)
    assert not any("verifying" in line for line in screen), screen
    assert screen[0].startswith("checked"), screen
    rows = dict(line.split(None, 1) for line in screen[:4])
    assert rows == {"checked": "21", "corrupt": "1", "removed": "1", "elapsed": rows["elapsed"]}
    assert len(value_column(screen[:4])) == 1
    assert screen[-1].strip() == bad.key


def test_verify_without_a_terminal_draws_nothing(server):
    from cli_harness import run_cli
    server.put(make_artifact())
    r = run_cli("verify", server=server)
    assert r.returncode == EXIT_OK and r.stderr == "" and "\r" not in r.stdout
