"""A rank's compile worker, seen from the rank: one `python -m
kcache.tools.compile_worker` child process, its job pipe (the child's
stdin) and its result pipe (read without blocking).

The child builds the same cache client (the rank's KCACHE_* environment),
names itself `<rank's name> compile worker` to the server, and exits when
the rank goes away (its stdin closes: it finishes the compile in hand
first) or is stopped (killed: a fault). Its stdout is
discarded (stderr is the rank's: its log lines reach the job's log).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import subprocess
import sys
import threading
import time

from . import placement as placing
from . import wire

log = logging.getLogger("kcache")

def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class CompileWorker:
    def __init__(self, environ: dict[str, str], name: str, placement: "placing.Placement | None" = None) -> None:
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env.update(environ)
        env.update({"KCACHE_CLIENT_NAME": name, "KCACHE_COLD_START": "wait",
                    "KCACHE_VERIFY_FIRST_USE": "0"})
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kcache.tools.compile_worker", str(write_fd)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=(write_fd,), env=env)
        finally:
            os.close(write_fd)
        if placement is not None:
            try:  # the child has one thread yet: every later one inherits this
                placing.apply(self.proc.pid, placement)
            except OSError as e:
                log.warning("kcache: the compile worker could not be placed (%s: cpus %s, priority %s); "
                            "it runs where the training may", e, sorted(placement.worker_cpus or ()),
                            placement.priority)
        self.reader = wire.Reader(read_fd)
        self.started = time.monotonic()
        self.compiling: dict[str, float] = {}  # key -> when the child took its lease
        # Messages go out from a thread of their own (pipe writes only, no
        # torch): the child reads nothing until it has imported torch, and a
        # job bigger than the pipe's buffer would otherwise hold the
        # training thread that long.
        self._outbox: "queue.Queue[bytes | None]" = queue.Queue()
        self._broken = False
        self._writer = threading.Thread(target=self._write_all, name="kcache-worker-pipe", daemon=True)
        self._writer.start()
        self.send({"kind": "hello", "sys_path": list(sys.path)})
        atexit.register(self.close)

    def _write_all(self) -> None:
        while True:
            data = self._outbox.get()
            if data is None:
                return
            try:
                wire.write_encoded(self.proc.stdin.fileno(), data)
            except (BrokenPipeError, OSError, ValueError):
                self._broken = True
                return

    def send(self, message: dict) -> bool:
        """Queues a message; False when the child is known to be gone (its
        pipe broke)."""
        if self._broken:
            return False
        self._outbox.put(wire.encode(message))
        return True

    def messages(self) -> list[dict]:
        out = self.reader.messages()
        for m in out:
            if m.get("kind") == "compiling":
                self.compiling[m["key"]] = time.monotonic()
            elif "key" in m:
                self.compiling.pop(m["key"], None)
        return out

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def rss_mb(self) -> float:
        return _rss_mb(self.proc.pid)

    def longest_compile(self) -> float:
        """Seconds the oldest compile in hand has run (0 when none)."""
        if not self.compiling:
            return 0.0
        return time.monotonic() - min(self.compiling.values())

    def close(self) -> None:
        """At the rank's exit: the child finishes the compile in hand (its
        region is then stored for the next start) and exits."""
        self._outbox.put(None)
        self._writer.join(timeout=5)
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def stop(self) -> None:
        """Kills the child (a fault: its region is orphaned)."""
        if self.reader.fd < 0:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close()
        os.close(self.reader.fd)
        self.reader.fd = -1
        self.reader.closed = True
