"""The servers a cold-start setup needs, on random loopback ports, and the
cleanup that stops every process the benchmark started (also on Ctrl-C)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_started: list[subprocess.Popen] = []


def track(proc: subprocess.Popen) -> subprocess.Popen:
    _started.append(proc)
    return proc


def stop(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """Stops a process and its whole group (torchrun's ranks, g++ children)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def stop_all() -> None:
    while _started:
        stop(_started.pop())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(work: Path) -> tuple[subprocess.Popen, int]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (scripts/setup.sh installs it)")
    port = free_port()
    proc = track(subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            time.sleep(0.05)
    stop(proc)
    raise RuntimeError("redis-server did not start")


def server_binary() -> Path:
    path = Path(os.environ.get("KCACHE_SERVER_BIN", REPO / "build/dev/server/kcache-server"))
    if not path.exists():
        raise RuntimeError(f"{path} is missing: run scripts/build.sh")
    return path


def start_server(work: Path, storage: str) -> tuple[subprocess.Popen, str]:
    """kcache-server on a random port; returns it and its base URL."""
    log = open(work / "kcache-server.log", "wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCACHE_")}
    proc = track(subprocess.Popen(
        [str(server_binary()), "--listen", "127.0.0.1:0", "--storage", storage],
        stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True))
    line = proc.stdout.readline().decode()
    m = re.match(r"listening on (\S+)", line)
    if not m:
        stop(proc)
        raise RuntimeError(f"kcache-server did not start: {line!r}")
    return proc, f"http://{m.group(1)}"


def server_metrics(url: str) -> dict[str, float]:
    """The server's Prometheus counters, summed over their labels."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + float(value)
    return out
