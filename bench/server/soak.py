#!/usr/bin/env python3
"""Soak: mixed load against a real kcache-server while the server and its
Redis are killed with SIGKILL and restarted, several times.

Load (threads of this process, all against one kcache-server):
- HTTP writers: PUT a fresh bundle (1 KB to 3 MB, a few past the 1 MiB
  spool threshold), retrying the same key after an error or a dropped
  connection, as the client does;
- HTTP readers: GET a key already written (or being written), or one never
  written (must be 404); every 200 body's SHA-256 is checked against the
  bundle written under that key;
- lease takers: several threads contend for the same key, as ranks do:
  POST /v1/leases/{key}, "compile", sometimes renew, sometimes give up
  (DELETE), else PUT with X-Kcache-Lease; the losers GET ?wait_ms= and must
  get the winner's bytes or a 404;
- RESP writers and readers: SET a fresh key (AUTH with a write token), GET
  and MGET keys already set (a read token), every value checked.

Chaos: every --event-every s one event, cycling through --events:
`server` (kill -9 kcache-server, restart it on the same ports), `redis`
(kill -9 redis-server and the AOF rewrite child it may have, restart it on
the same port and directory), `both`. Each stays down --down-s. After a
restart the driver probes (HTTP GET of a known key, HTTP PUT of a new
bundle, RESP GET of a known key) every 10 ms: recovery = restart → first
success of each.

Checks: every GET body and RESP value is compared with what was written
under its key (no corrupt byte is ever served); an acknowledged key (201 or
200 to a PUT, +OK to a SET) that reads as absent later is counted (with
Redis `appendfsync everysec` such a loss is possible, and is reported, not
hidden); at the end, with everything up, every acknowledged key is read
back and compared, and POST /v1/verify scrubs storage.

    .venv/bin/python bench/server/soak.py                      # 10 min, Redis, appendfsync always
    .venv/bin/python bench/server/soak.py --storage disk --events server
    .venv/bin/python bench/server/soak.py --seconds 30 --event-every 10 --out /tmp/s.json
    .venv/bin/python bench/server/soak.py --report             # SOAK.md from soak.json

A run's result is merged into --out (default bench/server/soak.json) under
its --name, and bench/server/SOAK.md is regenerated from that file (unless
--out is elsewhere).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import hashlib
import http.client
import json
import os
import pathlib
import platform
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
try:
    from kcache import _core  # the installed package (scripts/build.sh installs it into .venv)
except ImportError:
    sys.path.insert(0, str(REPO / "compile"))
    from kcache import _core  # noqa: E402

DEFAULT_OUT = HERE / "soak.json"
REPORT = HERE / "SOAK.md"
ANALYSIS = "## Analysis (written by hand"


# ---------------------------------------------------------------- helpers

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def digest(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def det_bytes(seed: str, n: int) -> bytes:
    """n bytes that depend only on seed (incompressible): every writer of
    a key produces the same bundle, so the first writer's bytes are the
    only right answer and any reader can check them."""
    return random.Random(seed).randbytes(n)


def pick_size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.60:
        return rng.randrange(1 << 10, 8 << 10)
    if r < 0.90:
        return rng.randrange(8 << 10, 64 << 10)
    if r < 0.99:
        return rng.randrange(64 << 10, 512 << 10)
    return rng.randrange(3 << 19, 3 << 20)  # 1.5-3 MiB: past the 1 MiB spool threshold


def bundle_for(key: str, size: int) -> bytes:
    manifest = {"key": key, "label": "SoakBlock/cpu:soak/f32/default/train", "compile_seconds": 0.5}
    return _core.write_bundle(json.dumps(manifest), [("mega_cache", det_bytes(key, size))], None, 1)


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


class Http:
    """One keep-alive HTTP connection, reopened after any failure."""

    def __init__(self, port: int, token: str, timeout: float = 10.0) -> None:
        self.port, self.token, self.timeout = port, token, timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None) -> tuple[int, dict, bytes]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        h = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        try:
            self.conn.request(method, path, body=body, headers=h)
            r = self.conn.getresponse()
            data = r.read()
            if r.getheader("Connection", "").lower() == "close":
                self.close()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class RespError(Exception):
    pass


class Resp:
    """A minimal RESP2 client (AUTH, GET, SET, MGET), reconnecting after any failure."""

    def __init__(self, port: int, token: str, timeout: float = 10.0) -> None:
        self.port, self.token, self.timeout = port, token, timeout
        self.sock: socket.socket | None = None
        self.buf = b""

    def _connect(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self.buf = b""
        if self._call([b"AUTH", self.token.encode()]) != "OK":
            raise RespError("AUTH refused")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def call(self, *args: bytes | str):
        try:
            if self.sock is None:
                self._connect()
            return self._call([a if isinstance(a, bytes) else a.encode() for a in args])
        except (OSError, RespError, ValueError):
            self.close()
            raise

    def _call(self, args: list[bytes]):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._read()

    def _fill(self) -> None:
        c = self.sock.recv(1 << 20)
        if not c:
            raise RespError("connection closed")
        self.buf += c

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RespError(f"unexpected reply {line[:40]!r}")


# ---------------------------------------------------------------- processes

class Proc:
    """A process in its own session, so that kill -9 takes its children too
    (redis-server's AOF rewrite child)."""

    def __init__(self, name: str, argv: list[str], log: pathlib.Path, stdout_pipe: bool = False) -> None:
        self.name, self.argv, self.log_path, self.stdout_pipe = name, argv, log, stdout_pipe
        self.proc: subprocess.Popen | None = None
        self.killed_by_us = False

    def start(self) -> None:
        log = open(self.log_path, "ab")
        self.killed_by_us = False
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE if self.stdout_pipe else log, stderr=log,
                                     start_new_session=True)
        log.close()

    def kill9(self) -> None:
        if self.proc is None:
            return
        self.killed_by_us = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.killed_by_us = True
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group: children too
        except (ProcessLookupError, PermissionError):
            pass
        return self.proc.wait()


def wait_port(port: int, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.01)
    return False


# ---------------------------------------------------------------- the soak

class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="kcache-soak-"))
        self.lock = threading.Lock()
        self.stop_load = threading.Event()
        self.t0 = time.monotonic()
        self.http_port, self.resp_port = free_port(), free_port()
        self.tokens = {role: secrets.token_hex(16) for role in ("read", "write", "admin")}
        tokens_file = self.work / "tokens"
        tokens_file.write_text("".join(f"{t} {r}\n" for r, t in self.tokens.items()))
        tokens_file.chmod(0o600)
        self.redis: Proc | None = None
        if args.storage == "redis":
            self.redis_port = free_port()
            (self.work / "redis").mkdir()
            self.redis = Proc("redis-server", [
                shutil.which("redis-server"), "--port", str(self.redis_port), "--bind", "127.0.0.1",
                "--dir", str(self.work / "redis"), "--save", "", "--appendonly", "yes",
                "--appendfsync", args.appendfsync, "--maxmemory-policy", "noeviction"],
                self.work / "redis.log")
            storage = (f"redis://127.0.0.1:{self.redis_port}/0?connect_timeout_ms=500&timeout_ms=2000")
        else:
            storage = f"disk:{self.work / 'store'}"
        self.server = Proc("kcache-server", [
            str(args.server_bin), "--listen", f"127.0.0.1:{self.http_port}", "--storage", storage,
            "--resp-listen", f"127.0.0.1:{self.resp_port}", "--tokens", str(tokens_file),
            "--lease-ttl-ms", str(args.lease_ttl_ms), "--threads", "2", "--access-log", "false",
            "--log-level", "warn", "--drain-timeout-ms", "2000"],
            self.work / "server.log", stdout_pipe=True)
        # key -> digest of what any writer sends under it (registered before the first send)
        self.expected: dict[str, str] = {}
        self.acked: dict[str, float] = {}     # key -> time of its first 201/200
        self.uncertain: set[str] = set()      # sent, never acknowledged
        self.resp_expected: dict[str, str] = {}
        self.resp_acked: dict[str, float] = {}
        self.resp_uncertain: set[str] = set()
        self.counts: collections.Counter = collections.Counter()
        self.latency: dict[str, list[float]] = collections.defaultdict(list)
        self.anomalies: list[dict] = []
        self.anomaly_counts: collections.Counter = collections.Counter()
        self.events: list[dict] = []
        self.successes: dict[str, list[float]] = collections.defaultdict(list)  # class -> success times
        self.timeline: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
        self.chaos_times: list[tuple[float, str]] = []  # (time, what) of every kill, for attributing losses
        self.lease_holder: dict[str, tuple[int, float]] = {}  # key -> (worker, granted at)
        self.lease_key = secrets.token_hex(32)
        self.lease_round = 0

    # -- bookkeeping
    def now(self) -> float:
        return time.monotonic() - self.t0

    def record(self, op: str, outcome: str, dt: float | None = None, ok_class: str | None = None) -> None:
        t = self.now()
        with self.lock:
            self.counts[(op, outcome)] += 1
            self.timeline[int(t)][f"{op} {'ok' if ok_class else outcome}"] += 1
            if dt is not None and ok_class:
                self.latency[op].append(dt)
            if ok_class:
                # (sent, answered): recovery counts only requests sent after the event
                self.successes[ok_class].append((t - (dt or 0.0), t))

    def anomaly(self, kind: str, **detail) -> None:
        with self.lock:
            self.anomaly_counts[kind] += 1
            if len(self.anomalies) < 200:
                self.anomalies.append({"t": round(self.now(), 3), "kind": kind, **detail})

    def kills_between(self, t_from: float, t_to: float) -> list[str]:
        with self.lock:
            return [w for t, w in self.chaos_times if t_from <= t <= t_to]

    # -- processes
    def start_redis(self) -> float:
        self.redis.start()
        t = self.now()
        # Ready = answers PING with PONG (not -LOADING) after replaying its AOF.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.redis_port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return t
            except OSError:
                pass
            time.sleep(0.01)
        raise RuntimeError("redis-server did not come back")

    def start_server(self) -> tuple[float, float]:
        for attempt in range(50):
            self.server.start()
            t = self.now()
            line = self.server.proc.stdout.readline().decode()
            if line.startswith("listening on"):
                self.server.proc.stdout.readline()  # "resp listening on"
                threading.Thread(target=self.server.proc.stdout.read, daemon=True).start()  # drain
                return t, self.now()
            self.server.proc.wait()
            # The port can still be held for a moment after a kill; anything else is fatal.
            log = self.server.log_path.read_text(errors="replace")[-2000:]
            if "address" not in log.lower() or attempt == 49:
                raise RuntimeError(f"kcache-server did not start: {line!r}\n{log}")
            time.sleep(0.1)
        raise AssertionError("unreachable")

    # -- load
    def put_key(self, conn: Http, key: str, body: bytes, op: str, lease: str | None = None) -> int | None:
        """PUTs body under key, retrying an unanswered or 5xx attempt up to
        8 times as the client would. The status that ended it, or None."""
        with self.lock:
            self.expected.setdefault(key, digest(body))
        headers = {"Content-Type": "application/octet-stream"}
        if lease:
            headers["X-Kcache-Lease"] = lease
        for attempt in range(8):
            t = time.monotonic()
            try:
                status, _, data = conn.request("PUT", f"/v1/artifacts/{key}", body=body, headers=headers)
            except (OSError, http.client.HTTPException) as e:
                self.record(op, type(e).__name__)
                with self.lock:
                    self.uncertain.add(key)
                time.sleep(0.05 * (attempt + 1))
                continue
            dt = time.monotonic() - t
            if status in (200, 201):
                self.record(op, str(status), dt, ok_class="write")
                with self.lock:
                    self.acked.setdefault(key, self.now())
                    self.uncertain.discard(key)
                return status
            self.record(op, str(status))
            if status in (502, 503, 500, 504):
                with self.lock:
                    self.uncertain.add(key)
                time.sleep(0.05 * (attempt + 1))
                continue
            self.anomaly("bad_put_status", key=key, status=status, body=data[:200].decode(errors="replace"))
            return status
        return None

    def check_get(self, key: str, status: int, body: bytes, op: str, t_read: float) -> None:
        with self.lock:
            want = self.expected.get(key)
            acked_at = self.acked.get(key)
        if status == 200:
            if want is None:
                self.anomaly("hit_on_unwritten_key", op=op, key=key)
            elif digest(body) != want:
                self.anomaly("wrong_bytes", op=op, key=key, size=len(body))
        elif status == 404 and acked_at is not None and acked_at < t_read:
            self.anomaly("acked_read_as_absent", op=op, key=key, acked_at=round(acked_at, 3),
                         kills_since_ack=self.kills_between(acked_at, t_read))

    def http_writer(self, i: int) -> None:
        rng = random.Random(f"w{i}")
        conn = Http(self.http_port, self.tokens["write"])
        interval = 1.0 / self.args.put_rate
        while not self.stop_load.is_set():
            t_next = time.monotonic() + rng.expovariate(1.0 / interval)
            key = secrets.token_hex(32)
            self.put_key(conn, key, bundle_for(key, pick_size(rng)), "http_put")
            time.sleep(max(0.0, t_next - time.monotonic()))
        conn.close()

    def http_reader(self, i: int) -> None:
        rng = random.Random(f"r{i}")
        conn = Http(self.http_port, self.tokens["read"])
        pool: list[str] = []
        n = 0
        while not self.stop_load.is_set():
            if n % 50 == 0:
                with self.lock:
                    pool = list(self.expected)
            n += 1
            key = secrets.token_hex(32) if rng.random() < 0.1 or not pool else rng.choice(pool)
            t_read = self.now()
            t = time.monotonic()
            try:
                status, _, body = conn.request("GET", f"/v1/artifacts/{key}")
            except (OSError, http.client.HTTPException) as e:
                self.record("http_get", type(e).__name__)
                time.sleep(0.05)
                continue
            dt = time.monotonic() - t
            self.record("http_get", str(status), dt, ok_class="read" if status in (200, 404) else None)
            if status in (200, 404):
                self.check_get(key, status, body, "http_get", t_read)
            elif status >= 500:
                time.sleep(0.05)
            else:
                self.anomaly("bad_get_status", key=key, status=status)
            time.sleep(rng.uniform(0, 2.0 / self.args.get_rate))
        conn.close()

    def lease_taker(self, i: int) -> None:
        rng = random.Random(f"l{i}")
        conn = Http(self.http_port, self.tokens["write"])
        ttl_s = self.args.lease_ttl_ms / 1000

        def call(op, method, path, headers=None):
            t = time.monotonic()
            try:
                status, h, body = conn.request(method, path, headers=headers)
            except (OSError, http.client.HTTPException) as e:
                self.record(op, type(e).__name__)
                time.sleep(0.05)
                return None, None, None
            ok = status < 500
            self.record(op, str(status), time.monotonic() - t, ok_class="lease" if ok else None)
            if not ok:
                time.sleep(0.05)
            return status, h, body

        while not self.stop_load.is_set():
            with self.lock:
                key, rnd = self.lease_key, self.lease_round
            size = random.Random(key).randrange(1 << 10, 128 << 10)
            t_read = self.now()
            status, _, body = call("lease_get", "GET", f"/v1/artifacts/{key}")
            if status == 200:
                self.check_get(key, 200, body, "lease_get", t_read)
                self.next_lease_round(rnd)
                continue
            status, h, body = call("lease_acquire", "POST", f"/v1/leases/{key}",
                                   headers={"X-Kcache-Client": f"soak-{i}"})
            if status == 201:
                token = json.loads(body)["lease"]
                now = self.now()
                with self.lock:
                    prev = self.lease_holder.get(key)
                    self.lease_holder[key] = (i, now, "holding")
                # Only a holder that has not yet sent its PUT or DELETE (either
                # may release the lease before this thread hears of it).
                if prev is not None and prev[0] != i and prev[2] == "holding" and now - prev[1] < ttl_s * 0.9:
                    # Two live holders at once: expected only when the lease
                    # store itself was lost (disk storage keeps leases in the
                    # server's memory, and the server was killed).
                    kills = self.kills_between(prev[1], now)
                    lost_store = self.redis is None and any(k in ("server", "both") for k in kills)
                    self.anomaly("lease_regranted_after_restart" if lost_store else "lease_granted_twice",
                                 key=key, first=prev[0], second=i, kills_between=kills)
                time.sleep(rng.uniform(0.05, 0.6))  # compiling
                if rng.random() < 0.2:
                    call("lease_renew", "POST", f"/v1/leases/{key}/renew", headers={"X-Kcache-Lease": token})
                with self.lock:
                    if self.lease_holder.get(key, (None,))[0] == i:
                        self.lease_holder[key] = (i, now, "releasing")
                if rng.random() < 0.1:
                    call("lease_release", "DELETE", f"/v1/leases/{key}", headers={"X-Kcache-Lease": token})
                    with self.lock:
                        if self.lease_holder.get(key, (None,))[0] == i:
                            del self.lease_holder[key]
                    continue
                st = self.put_key(conn, key, bundle_for(key, size), "lease_put", lease=token)
                with self.lock:
                    if self.lease_holder.get(key, (None,))[0] == i:
                        del self.lease_holder[key]
                if st in (200, 201):
                    self.next_lease_round(rnd)
            elif status == 409:
                t_read = self.now()
                status, h, body = call("lease_wait", "GET", f"/v1/artifacts/{key}?wait_ms=3000")
                if status in (200, 404):
                    self.check_get(key, status, body, "lease_wait", t_read)
                    self.record("lease_wait_outcome", "waited_hit" if status == 200 else "waited_miss")
            elif status == 200:
                pass  # it landed meanwhile: the next GET reads it
        conn.close()

    def next_lease_round(self, rnd: int) -> None:
        with self.lock:
            if self.lease_round == rnd:
                self.lease_round += 1
                self.lease_key = secrets.token_hex(32)

    def resp_value(self, key: str, rng: random.Random) -> bytes:
        return det_bytes(key, rng.randrange(100, 32 << 10))

    def resp_writer(self, i: int) -> None:
        rng = random.Random(f"rw{i}")
        r = Resp(self.resp_port, self.tokens["write"])
        interval = 1.0 / self.args.set_rate
        while not self.stop_load.is_set():
            t_next = time.monotonic() + rng.expovariate(1.0 / interval)
            key = f"soak:{secrets.token_hex(16)}"
            value = self.resp_value(key, rng)
            with self.lock:
                self.resp_expected[key] = digest(value)
            for attempt in range(8):
                t = time.monotonic()
                try:
                    ok = r.call("SET", key, value)
                except (OSError, RespError, ValueError) as e:
                    self.record("resp_set", type(e).__name__)
                    with self.lock:
                        self.resp_uncertain.add(key)
                    time.sleep(0.05 * (attempt + 1))
                    continue
                self.record("resp_set", "OK" if ok == "OK" else repr(ok), time.monotonic() - t, ok_class="write")
                if ok == "OK":
                    with self.lock:
                        self.resp_acked.setdefault(key, self.now())
                        self.resp_uncertain.discard(key)
                break
            time.sleep(max(0.0, t_next - time.monotonic()))
        r.close()

    def check_resp(self, key: str, value, t_read: float, op: str) -> None:
        with self.lock:
            want = self.resp_expected.get(key)
            acked_at = self.resp_acked.get(key)
        if value is not None:
            if want is None:
                self.anomaly("hit_on_unwritten_key", op=op, key=key)
            elif digest(value) != want:
                self.anomaly("wrong_bytes", op=op, key=key, size=len(value))
        elif acked_at is not None and acked_at < t_read:
            self.anomaly("acked_read_as_absent", op=op, key=key, acked_at=round(acked_at, 3),
                         kills_since_ack=self.kills_between(acked_at, t_read))

    def resp_reader(self, i: int) -> None:
        rng = random.Random(f"rr{i}")
        r = Resp(self.resp_port, self.tokens["read"])
        while not self.stop_load.is_set():
            with self.lock:
                pool = list(self.resp_expected) if self.resp_expected else []
            keys = [rng.choice(pool) if pool and rng.random() > 0.1 else f"soak:{secrets.token_hex(16)}"
                    for _ in range(rng.choice((1, 1, 1, 5)))]
            op = "resp_get" if len(keys) == 1 else "resp_mget"
            t_read = self.now()
            t = time.monotonic()
            try:
                got = r.call("GET", keys[0]) if len(keys) == 1 else r.call("MGET", *keys)
            except (OSError, RespError, ValueError) as e:
                self.record(op, type(e).__name__ if not isinstance(e, RespError) else "ERR")
                time.sleep(0.05)
                continue
            self.record(op, "reply", time.monotonic() - t, ok_class="read")
            values = [got] if len(keys) == 1 else got
            for k, v in zip(keys, values):
                self.check_resp(k, v, t_read, op)
            time.sleep(rng.uniform(0, 2.0 / self.args.get_rate))
        r.close()

    # -- chaos
    def probe_recovery(self, t_restart: float, limit: float = 60.0) -> dict:
        """HTTP GET of a known key, HTTP PUT of a new bundle and RESP GET of a
        known key, each every 10 ms until it succeeds: seconds after t_restart."""
        with self.lock:
            known = next(iter(self.acked), None)
            known_resp = next(iter(self.resp_acked), None)
        out: dict[str, float | None] = {"http_get": None, "http_put": None, "resp_get": None}
        http_r = Http(self.http_port, self.tokens["read"], timeout=2)
        http_w = Http(self.http_port, self.tokens["write"], timeout=2)
        resp = Resp(self.resp_port, self.tokens["read"], timeout=2)
        key = secrets.token_hex(32)
        body = bundle_for(key, 2048)
        with self.lock:
            self.expected[key] = digest(body)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and None in out.values():
            if out["http_get"] is None and known:
                try:
                    st, _, b = http_r.request("GET", f"/v1/artifacts/{known}")
                    if st == 200 and digest(b) == self.expected[known]:
                        out["http_get"] = self.now() - t_restart
                except (OSError, http.client.HTTPException):
                    pass
            if out["http_put"] is None:
                try:
                    st, _, _ = http_w.request("PUT", f"/v1/artifacts/{key}", body=body)
                    if st in (200, 201):
                        out["http_put"] = self.now() - t_restart
                        with self.lock:
                            self.acked.setdefault(key, self.now())
                except (OSError, http.client.HTTPException):
                    pass
            if out["resp_get"] is None and known_resp:
                try:
                    v = resp.call("GET", known_resp)
                    if v is not None and digest(v) == self.resp_expected[known_resp]:
                        out["resp_get"] = self.now() - t_restart
                except (OSError, RespError, ValueError):
                    pass
            time.sleep(0.01)
        http_r.close(), http_w.close(), resp.close()
        return {k: (round(v, 3) if v is not None else None) for k, v in out.items()}

    def first_success_after(self, t: float) -> dict:
        with self.lock:
            out = {}
            for cls, times in self.successes.items():
                later = [end for sent, end in times[-20000:] if sent > t]
                out[cls] = round(min(later) - t, 3) if later else None
            return out

    def chaos_event(self, what: str) -> None:
        ev: dict = {"what": what, "t_kill": round(self.now(), 3)}
        with self.lock:
            self.chaos_times.append((self.now(), what))
        if what in ("redis", "both"):
            self.redis.kill9()
        if what in ("server", "both"):
            self.server.kill9()
        t_kill = self.now()
        time.sleep(self.args.down_s)
        # Recovery counts from here: the restart (the first process started),
        # so Redis's AOF replay and the server's start are inside it.
        t_restart = self.now()
        if what in ("redis", "both"):
            t_r = self.start_redis()
            ev["redis_restarted"] = round(t_r, 3)
            ev["redis_ready_s"] = round(self.now() - t_r, 3)
        if what in ("server", "both"):
            t_s, t_listen = self.start_server()
            ev["server_restarted"] = round(t_s, 3)
            ev["server_listening_s"] = round(t_listen - t_s, 3)
        ev["t_restart"] = round(t_restart, 3)
        ev["t_ready"] = round(self.now(), 3)
        ev["probe_recovery_s"] = self.probe_recovery(t_restart)
        time.sleep(1.0)
        ev["load_first_success_s"] = self.first_success_after(t_restart)
        ev["load_first_success_after_kill_s"] = self.first_success_after(t_kill)
        with self.lock:
            self.events.append(ev)
        print(f"[{self.now():7.1f}s] {what}: {json.dumps({k: v for k, v in ev.items() if k != 'what'})}",
              flush=True)

    def watchdog(self) -> None:
        """A process that died without our kill is an anomaly; it is restarted."""
        for p in [self.server] + ([self.redis] if self.redis else []):
            if p.proc is not None and p.proc.poll() is not None and not p.killed_by_us:
                self.anomaly("process_died", which=p.name, code=p.proc.returncode,
                             log=p.log_path.read_text(errors="replace")[-1500:])
                if p is self.server:
                    self.start_server()
                else:
                    self.start_redis()

    # -- final check
    def final_check(self) -> dict:
        conn = Http(self.http_port, self.tokens["admin"], timeout=30)
        resp = Resp(self.resp_port, self.tokens["read"], timeout=30)

        def get(key):
            for _ in range(50):
                try:
                    st, _, b = conn.request("GET", f"/v1/artifacts/{key}")
                    if st < 500:
                        return st, b
                except (OSError, http.client.HTTPException):
                    pass
                time.sleep(0.2)
            return None, b""

        def rget(key):
            for _ in range(50):
                try:
                    return True, resp.call("GET", key)
                except (OSError, RespError, ValueError):
                    time.sleep(0.2)
            return False, None

        res = collections.Counter()
        lost, wrong = [], []
        with self.lock:
            acked, uncertain = dict(self.acked), set(self.uncertain)
            resp_acked, resp_uncertain = dict(self.resp_acked), set(self.resp_uncertain)
        for key, t_ack in acked.items():
            st, b = get(key)
            if st == 200 and digest(b) == self.expected[key]:
                res["http_acked_ok"] += 1
            elif st == 200:
                res["http_acked_wrong"] += 1
                wrong.append(key)
            else:
                res[f"http_acked_{st}"] += 1
                lost.append({"key": key, "proto": "http", "acked_at": round(t_ack, 3), "status": st,
                             "kills_since_ack": self.kills_between(t_ack, 1e12)})
        for key in uncertain - set(acked):
            st, b = get(key)
            if st == 200:
                res["http_unacked_present" if digest(b) == self.expected[key] else "http_unacked_wrong"] += 1
            else:
                res[f"http_unacked_{st}"] += 1
        for key, t_ack in resp_acked.items():
            ok, v = rget(key)
            if ok and v is not None and digest(v) == self.resp_expected[key]:
                res["resp_acked_ok"] += 1
            elif ok and v is not None:
                res["resp_acked_wrong"] += 1
                wrong.append(key)
            else:
                res["resp_acked_absent" if ok else "resp_acked_error"] += 1
                lost.append({"key": key, "proto": "resp", "acked_at": round(t_ack, 3),
                             "kills_since_ack": self.kills_between(t_ack, 1e12)})
        for key in resp_uncertain - set(resp_acked):
            ok, v = rget(key)
            res["resp_unacked_present" if v is not None and digest(v) == self.resp_expected[key]
                else "resp_unacked_wrong" if v is not None else "resp_unacked_absent"] += 1
        try:
            st, _, body = conn.request("POST", "/v1/verify")
            verify = json.loads(body) if st == 200 else {"status": st}
        except (OSError, http.client.HTTPException) as e:
            verify = {"error": repr(e)}
        conn.close(), resp.close()
        return {"counts": dict(res), "lost": lost[:100], "lost_total": len(lost), "wrong": wrong[:100],
                "verify": verify}

    # -- run
    def run(self) -> dict:
        a = self.args
        try:
            if self.redis:
                self.start_redis()
            self.start_server()
            workers = ([threading.Thread(target=self.http_writer, args=(i,)) for i in range(a.http_writers)]
                       + [threading.Thread(target=self.http_reader, args=(i,)) for i in range(a.http_readers)]
                       + [threading.Thread(target=self.lease_taker, args=(i,)) for i in range(a.lease_takers)]
                       + [threading.Thread(target=self.resp_writer, args=(i,)) for i in range(a.resp_writers)]
                       + [threading.Thread(target=self.resp_reader, args=(i,)) for i in range(a.resp_readers)])
            for w in workers:
                w.daemon = True
                w.start()
            events = [e for e in a.events.split(",") if e]
            if self.redis is None:
                events = [e for e in events if e == "server"] or ["server"]
            n = 0
            next_event = a.first_event_s
            end = a.seconds
            # --all-events: the load goes on past --seconds until each listed
            # event has happened once and 3 s of load followed the last (a
            # loaded machine restarts slowly; the short test must not lose
            # an event to that).
            owed = lambda: a.all_events and n < len(events)  # noqa: E731
            while self.now() < end or owed():
                self.watchdog()
                if events and self.now() >= next_event and (self.now() < end - a.down_s - 3 or owed()):
                    self.chaos_event(events[n % len(events)])
                    n += 1
                    next_event = self.now() + a.event_every
                    if a.all_events and n == len(events):
                        end = max(end, self.now() + 3)
                time.sleep(0.05)
            load_seconds = self.now()
            self.stop_load.set()
            for w in workers:
                w.join(30)
            hung = sum(w.is_alive() for w in workers)
            if hung:
                self.anomaly("worker_hung", n=hung)
            self.watchdog()
            final = self.final_check()
            server_rc = self.server.stop()
            redis_rc = self.redis.stop() if self.redis else None
            logs = {"server": self.server.log_path.read_text(errors="replace")[-4000:]}
            return self.result(load_seconds, final, server_rc, redis_rc, logs)
        finally:
            self.stop_load.set()
            self.server.stop()
            if self.redis:
                self.redis.stop()
            shutil.rmtree(self.work, ignore_errors=True)

    def result(self, load_seconds, final, server_rc, redis_rc, logs) -> dict:
        a = self.args
        counts: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for (op, outcome), n in sorted(self.counts.items()):
            counts[op][outcome] = n
        lat = {op: {"n": len(v), "p50_ms": round(pct(v, 0.5) * 1000, 2), "p99_ms": round(pct(v, 0.99) * 1000, 2)}
               for op, v in self.latency.items() if v}
        timeline = [{"t": t, **dict(c)} for t, c in sorted(self.timeline.items())]
        return {
            "name": a.name,
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "arch": platform.machine(), "kernel": platform.release(),
                        "load_avg_at_end": os.getloadavg()},
            "git": git_describe(),
            "config": {"seconds": a.seconds, "storage": a.storage,
                       "redis_appendfsync": a.appendfsync if a.storage == "redis" else None,
                       "events": a.events, "event_every_s": a.event_every, "first_event_s": a.first_event_s,
                       "down_s": a.down_s, "lease_ttl_ms": a.lease_ttl_ms,
                       "threads": {"http_writers": a.http_writers, "http_readers": a.http_readers,
                                   "lease_takers": a.lease_takers, "resp_writers": a.resp_writers,
                                   "resp_readers": a.resp_readers},
                       "put_rate_per_writer": a.put_rate, "set_rate_per_writer": a.set_rate,
                       "server_bin": str(a.server_bin)},
            "load_seconds": round(load_seconds, 1),
            "written": {"http_keys": len(self.expected), "http_acked": len(self.acked),
                        "resp_keys": len(self.resp_expected), "resp_acked": len(self.resp_acked)},
            "counts": counts,
            "latency": lat,
            "anomaly_counts": dict(self.anomaly_counts),
            "anomalies": self.anomalies,
            "events": self.events,
            "final": final,
            "exit": {"server": server_rc, "redis": redis_rc},
            "server_log_tail": logs["server"],
            "timeline": timeline,
        }


def git_describe() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ---------------------------------------------------------------- report

def verdict(run: dict) -> tuple[bool, list[str]]:
    """The run's invariants: what must be zero for it to pass."""
    f = run["final"]["counts"]
    problems = []
    bad_kinds = {k: v for k, v in run["anomaly_counts"].items()
                 if k in ("wrong_bytes", "hit_on_unwritten_key", "process_died", "worker_hung",
                          "bad_put_status", "bad_get_status")}
    if bad_kinds:
        problems.append(f"anomalies {bad_kinds}")
    if f.get("http_acked_wrong", 0) or f.get("resp_acked_wrong", 0) or f.get("http_unacked_wrong", 0) \
            or f.get("resp_unacked_wrong", 0):
        problems.append("wrong bytes at the final read")
    if run["final"]["lost_total"]:
        problems.append(f"{run['final']['lost_total']} acknowledged writes not readable at the end")
    if run["anomaly_counts"].get("acked_read_as_absent", 0):
        problems.append(f"{run['anomaly_counts']['acked_read_as_absent']} reads of an acknowledged key were misses")
    corrupt = run["final"]["verify"].get("corrupt")
    if corrupt:
        problems.append(f"verify found {len(corrupt)} corrupt objects")
    return not problems, problems


def fmt(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def write_report(out: pathlib.Path, path: pathlib.Path = REPORT) -> None:
    runs = json.loads(out.read_text())["runs"]
    L = ["# Soak: mixed load with kill -9 of kcache-server and Redis", "",
         f"Generated by `bench/server/soak.py` from `{out.name}` (the raw results; one entry per run). "
         "Each run drives one kcache-server (with `--tokens`, `--resp-listen`, `--lease-ttl-ms` below) from "
         "threads of one Python process on the same machine: HTTP writers PUT fresh bundles "
         "(1 KB–3 MB, 1 % past the 1 MiB spool threshold; an unanswered or 5xx PUT is retried on the same key, "
         "as the client does), HTTP readers GET keys written or being written (10 % never written), lease "
         "takers contend for one key at a time as ranks do (acquire, compile 50–600 ms, renew 20 %, give up "
         "10 %, else PUT with the lease; the others `GET ?wait_ms=3000`), RESP writers SET fresh keys and "
         "RESP readers GET/MGET them. Every 200 body and RESP value is checked by SHA-256 against what was "
         "written under its key. Events kill with SIGKILL (the process group: Redis's AOF-rewrite child too) "
         "and restart on the same ports and data after `down_s`; recovery is restart → first success of a "
         "probe retried every 10 ms (HTTP GET of a known key, HTTP PUT of a new bundle, RESP GET of a known "
         "key). At the end, with everything up, every acknowledged key is read back and `POST /v1/verify` "
         "scrubs storage. The machine has 2 cores shared by the load, the server, Redis and other work: "
         "rates are not benchmarks.", ""]
    L += ["## Runs", "",
          "| run | date | storage | Redis fsync | load s | events | HTTP acked | RESP acked | wrong bytes served | acked lost at end | acked read as miss | verify corrupt | verdict |",
          "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in runs:
        ok, problems = verdict(r)
        ev = collections.Counter(e["what"] for e in r["events"])
        wrong = r["anomaly_counts"].get("wrong_bytes", 0) + sum(
            v for k, v in r["final"]["counts"].items() if k.endswith("_wrong"))
        L.append(f"| {r['name']} | {r['date'][:16]} | {r['config']['storage']} | "
                 f"{r['config']['redis_appendfsync'] or '—'} | {r['load_seconds']:.0f} | "
                 f"{', '.join(f'{n}× {w}' for w, n in sorted(ev.items()))} | {r['written']['http_acked']} | "
                 f"{r['written']['resp_acked']} | {wrong} | {r['final']['lost_total']} | "
                 f"{r['anomaly_counts'].get('acked_read_as_absent', 0)} | "
                 f"{len(r['final']['verify'].get('corrupt', []))} | {'pass' if ok else 'FAIL: ' + '; '.join(problems)} |")
    for r in runs:
        L += ["", f"## {r['name']}", "",
              f"{r['config']['storage']} storage" + (f", redis-server `appendonly yes, appendfsync "
                                                     f"{r['config']['redis_appendfsync']}`" if r['config']['storage'] == 'redis' else "")
              + f"; {r['load_seconds']:.0f} s of load; lease TTL {r['config']['lease_ttl_ms']} ms; threads "
              + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r["config"]["threads"].items())
              + f"; commit {r.get('git', '?')}; load average at the end "
              + ", ".join(f"{x:.1f}" for x in r["machine"].get("load_avg_at_end", [])) + ".", "",
              "### Recovery", "",
              "Seconds. *ready*: Redis answering PING (its AOF replayed) / kcache-server printing `listening on`, "
              "after its start. Probe columns, the recovery time: restart (the killed processes started again, Redis "
              "first) → first success (HTTP GET verified, HTTP PUT 201/200, RESP GET verified); Redis's AOF replay "
              "and the server's start are inside it. *load after kill*: kill → first success of any load thread (read / write / lease).", "",
              "| # | at s | killed | down s | Redis ready | server ready | HTTP GET | HTTP PUT | RESP GET | load after kill: read / write / lease |",
              "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]
        for n, e in enumerate(r["events"], 1):
            p = e["probe_recovery_s"]
            lf = e["load_first_success_after_kill_s"]
            L.append(f"| {n} | {e['t_kill']:.1f} | {e['what']} | {e['t_restart'] - e['t_kill']:.2f} | "
                     f"{fmt(e.get('redis_ready_s'))} | {fmt(e.get('server_listening_s'))} | {fmt(p['http_get'])} | "
                     f"{fmt(p['http_put'])} | {fmt(p['resp_get'])} | "
                     f"{fmt(lf.get('read'))} / {fmt(lf.get('write'))} / {fmt(lf.get('lease'))} |")
        probes = [e["probe_recovery_s"][k] for e in r["events"] for k in ("http_get", "http_put", "resp_get")
                  if e["probe_recovery_s"][k] is not None]
        if probes:
            L += ["", f"Probe recovery over all events: median {pct(probes, 0.5):.3f} s, max {max(probes):.3f} s."]
        L += ["", "### Requests", "", "| op | outcome: count | p50 / p99 ms of successes |", "|---|---|---|"]
        for op, outs in r["counts"].items():
            lt = r["latency"].get(op)
            L.append(f"| {op} | {', '.join(f'{k}: {v}' for k, v in outs.items())} | "
                     + (f"{lt['p50_ms']:.1f} / {lt['p99_ms']:.1f}" if lt else "—") + " |")
        f = r["final"]
        L += ["", "### At the end", "",
              "Every acknowledged key read back (`*_acked_ok` must equal the acknowledged counts above), keys "
              "sent but never acknowledged (a dropped connection, a 5xx) read too — present or absent, never "
              "wrong: " + ", ".join(f"{k} {v}" for k, v in sorted(f["counts"].items())) + ".",
              f"`POST /v1/verify`: {json.dumps(f['verify'])}."]
        if f["lost_total"]:
            L += ["", f"Acknowledged writes not readable at the end: {f['lost_total']} (first: "
                  + json.dumps(f["lost"][:5]) + ")."]
        others = {k: v for k, v in r["anomaly_counts"].items()}
        L += ["", "Anomalies (all kinds, counted): " + (json.dumps(others) if others else "none") + "."]
        if r["anomalies"]:
            L += ["", "First anomalies: " + json.dumps(r["anomalies"][:5])]
        L += ["", f"Exit codes at the end (SIGTERM): {json.dumps(r['exit'])}."]
    # A hand-written analysis at the end survives a regeneration (reread it against the figures).
    kept = ""
    if path.exists() and ANALYSIS in path.read_text():
        kept = "\n" + path.read_text()[path.read_text().index(ANALYSIS):]
    path.write_text("\n".join(L) + "\n" + kept)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=600, help="seconds of load (default 600)")
    p.add_argument("--storage", choices=["redis", "disk"], default="redis")
    p.add_argument("--appendfsync", choices=["always", "everysec"], default="always")
    p.add_argument("--events", default="server,redis,both", help="comma-separated: server, redis, both")
    p.add_argument("--event-every", type=float, default=45, help="seconds between events")
    p.add_argument("--first-event-s", type=float, default=25)
    p.add_argument("--all-events", action="store_true",
                   help="run past --seconds until each of --events happened once (then 3 s more)")
    p.add_argument("--down-s", type=float, default=1.0, help="how long a killed process stays down")
    p.add_argument("--lease-ttl-ms", type=int, default=5000)
    p.add_argument("--http-writers", type=int, default=2)
    p.add_argument("--http-readers", type=int, default=3)
    p.add_argument("--lease-takers", type=int, default=3)
    p.add_argument("--resp-writers", type=int, default=1)
    p.add_argument("--resp-readers", type=int, default=2)
    p.add_argument("--put-rate", type=float, default=5, help="PUTs/s per HTTP writer (Poisson)")
    p.add_argument("--set-rate", type=float, default=10, help="SETs/s per RESP writer (Poisson)")
    p.add_argument("--get-rate", type=float, default=50, help="about this many GETs/s per reader")
    p.add_argument("--server-bin", type=pathlib.Path,
                   default=pathlib.Path(os.environ.get("KCACHE_SERVER_BIN", REPO / "build/dev/server/kcache-server")))
    p.add_argument("--name", help="the run's name in --out (default: storage-fsync)")
    p.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    p.add_argument("--report", action="store_true", help="only regenerate SOAK.md from --out")
    a = p.parse_args()
    if a.report:
        write_report(a.out, REPORT if a.out.resolve() == DEFAULT_OUT.resolve() else a.out.with_suffix(".md"))
        return
    if a.storage == "redis" and not shutil.which("redis-server"):
        raise SystemExit("redis-server is not installed")
    a.name = a.name or (f"redis-{a.appendfsync}" if a.storage == "redis" else "disk")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    run = Soak(a).run()
    data = json.loads(a.out.read_text()) if a.out.exists() else {"runs": []}
    data["runs"] = [r for r in data["runs"] if r["name"] != a.name] + [run]
    a.out.write_text(json.dumps(data, indent=1) + "\n")
    ok, problems = verdict(run)
    print(json.dumps({"name": a.name, "written": run["written"], "anomalies": run["anomaly_counts"],
                      "final": run["final"]["counts"], "lost": run["final"]["lost_total"],
                      "events": len(run["events"]), "verdict": "pass" if ok else problems}))
    if a.out.resolve() == DEFAULT_OUT.resolve():
        write_report(a.out)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
