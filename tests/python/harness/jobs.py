"""A job (a training script, torchrun and its ranks, their compile workers)
run to its end, or, past its time limit, stopped so that the failure says
where it hung.

`subprocess.run(..., timeout=...)` kills only the process it started and
raises with nothing of what the job printed (TimeoutExpired holds no output
once communicate() has given up), so a hang in CI left no trace
(bench/testtime/clean-clone-39.log). Here, past the limit, every process of
the job's tree is sent SIGABRT: a Python process started with
PYTHONFAULTHANDLER=1 (kc_testing.python_env sets it) prints the stack of
each of its threads before it dies, and the failure carries the tail of
what the job printed, those stacks included. Before that, where gdb is
installed, each Python process's native threads are printed too (the hang
of docs/distributed.md, "A DDP job that hangs at its exit", is a C++
destructor joining a thread: its Python stack is one line).
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import time


class JobTimedOut(AssertionError):
    """The job ran past its limit; the message ends with what it printed."""


def descendants(pid: int) -> list[int]:
    """Every live process under `pid`, parents before children (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(0), []):
            out.append(c)
            todo.append(c)
    return out


def native_stacks(pid: int, timeout: float = 60) -> str:
    """Every thread's native stack of process `pid` (gdb), or why not."""
    try:
        out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                             capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return f"(no native stacks: {type(e).__name__})"
    return "\n".join(line for line in out.stdout.splitlines() if line.startswith(("#", "Thread")))


def _is_python(pid: int) -> bool:
    try:
        return "python" in pathlib.Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return False


def start_job(cmd: list[str], *, env: dict[str, str] | None = None,
              cwd: str | os.PathLike | None = None) -> subprocess.Popen:
    """`cmd` started in a session of its own, stdout and stderr piped as
    text; finish_job waits for it."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True)


def finish_job(proc: subprocess.Popen, timeout: float, tail: int = 60000) -> subprocess.CompletedProcess:
    """The job's end (its output captured), or JobTimedOut past `timeout`
    seconds with every thread's stack of every Python process of the job in
    the message."""
    try:
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        tree = descendants(proc.pid)
        native = "".join(f"\n--- native threads of {pid} (gdb) ---\n{native_stacks(pid)}"
                         for pid in [proc.pid, *tree][:8] if _is_python(pid))
        # Children first, so each prints its stacks before its parent reacts
        # to the death of a child (torchrun tears the others down).
        for pid in reversed(tree):
            _signal(pid, signal.SIGABRT)
        time.sleep(3)
        _signal(proc.pid, signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            for pid in [proc.pid, *descendants(proc.pid)]:
                _signal(pid, signal.SIGKILL)
            out, err = proc.communicate()
        for pid in tree:  # what the SIGABRT left (a process without a Python stack to print)
            _signal(pid, signal.SIGKILL)
        raise JobTimedOut(f"{str(proc.args)[:300]} ran past {timeout:.0f} s; its {len(tree) + 1} processes were "
                          f"sent SIGABRT (each Python one printed its threads' stacks)\n--- stdout (tail) ---\n"
                          f"{(out or '')[-tail // 4:]}\n--- stderr (tail) ---\n{(err or '')[-tail:]}"
                          f"{native[-tail:]}") from None
    finally:
        if proc.poll() is None:  # an exception in this process (KeyboardInterrupt)
            for pid in [proc.pid, *descendants(proc.pid)]:
                _signal(pid, signal.SIGKILL)
            proc.wait()


def run_job(cmd: list[str], *, timeout: float, env: dict[str, str] | None = None,
            cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """start_job then finish_job."""
    return finish_job(start_job(cmd, env=env, cwd=cwd), timeout)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
