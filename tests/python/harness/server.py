"""ServerProcess: one real kcache-server on a random loopback port.

The binary is $KCACHE_SERVER_BIN, else build/dev/server/kcache-server under
the repository root. The process gets the caller's environment without any
KCACHE_* variable (plus `env`), writes its log to a file (a pipe could fill
up), and is started once its "listening on" line (and, with --resp-listen,
its "resp listening on" line) has been read. With `wait_healthy`, /healthz
must answer first: the server prints its line before it installs its
SIGTERM handler, so a stop() right after start would not drain.
"""

from __future__ import annotations

import http.client
import os
import pathlib
import secrets
import signal
import ssl
import subprocess
import urllib.request

from .jobs import native_stacks

REPO = pathlib.Path(__file__).resolve().parents[3]


def server_bin() -> pathlib.Path:
    return pathlib.Path(os.environ.get("KCACHE_SERVER_BIN", REPO / "build/dev/server/kcache-server"))


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any KCACHE_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCACHE_")}
    env.update(extra)
    return env


class ServerProcess:
    def __init__(self, tmp: pathlib.Path, storage: str = "memory:", args: list[str] | None = None,
                 env: dict[str, str] | None = None, tls: ssl.SSLContext | None = None,
                 wait_healthy: bool = False, log_name: str | None = None):
        self.tls = tls  # a client context when the server speaks HTTPS
        self.log_path = tmp / (log_name or f"server-{secrets.token_hex(4)}.log")
        cmd = [str(server_bin()), "--listen", "127.0.0.1:0", "--storage", storage, *(args or [])]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, env=clean_env(**(env or {})))
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            self._fail(f"kcache-server did not start: {line!r}")
        self.host, port = line.split()[-1].rsplit(":", 1)
        self.port = int(port)
        self.url = f"{'https' if tls else 'http'}://{self.host}:{self.port}"
        self.resp_port = None
        if "--resp-listen" in cmd:
            line = self.proc.stdout.readline().decode()
            if not line.startswith("resp listening on "):
                self._fail(f"no RESP endpoint announced: {line!r}")
            self.resp_port = int(line.split()[-1].rsplit(":", 1)[1])
        if wait_healthy:
            assert self.http("GET", "/healthz")[0] == 200

    def _fail(self, why: str):
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        raise RuntimeError(f"{why} (exit {self.proc.returncode})\n{self.read_log()}")

    def read_log(self) -> str:
        if not self.log.closed:  # after stop() the file is closed, its text still there
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def http(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
             timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
        """(status, lower-case headers, body) of one request on a new connection."""
        conn = (http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls) if self.tls
                else http.client.HTTPConnection(self.host, self.port, timeout=timeout))
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()

    def metrics(self) -> dict[str, float]:
        """Prometheus samples by metric name, summed over label sets."""
        text = urllib.request.urlopen(self.url + "/metrics", timeout=10).read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                base = name.split("{", 1)[0]
                out[base] = out.get(base, 0.0) + float(value)
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, sig=signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._dump_threads()
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def _dump_threads(self) -> None:
        """A server that did not stop: every thread's stack (gdb) into its
        log before the kill, so the failure shows where it hung (seen twice
        on 2026-12-05: docs/STATUS.md)."""
        stacks = native_stacks(self.proc.pid)
        self.log.write(("\n--- threads of the server that did not stop (gdb) ---\n" + stacks + "\n").encode())
        self.log.flush()
