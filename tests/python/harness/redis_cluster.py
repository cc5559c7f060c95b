"""A real Redis Cluster on loopback for the server tests and the storage
benchmarks: redis-server nodes on random free ports (another test's or
another user's redis-server may hold any fixed port), joined with
`redis-cli --cluster create`, torn down (processes killed, node directories
with their nodes.conf removed) by stop().

Also: adding an empty master (`redis-cli --cluster add-node`), moving a slot
by hand (CLUSTER SETSLOT IMPORTING / MIGRATING, MIGRATE one key at a time,
SETSLOT NODE), and the key slot function (CRC16/XMODEM, which is what
binascii.crc_hqx computes with an initial value of 0, with Redis's hash-tag
rule).
"""

from __future__ import annotations

import binascii
import pathlib
import shutil
import socket
import subprocess
import time

from harness.redis import REDIS
from harness.resp import RespConnection

REDIS_CLI = shutil.which("redis-cli")
SLOTS = 16384


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port: int, *args: str, timeout: float = 30) -> str:
    return subprocess.run([REDIS_CLI, "-p", str(port), *args], capture_output=True, text=True,
                          timeout=timeout).stdout


# One RESP connection to a node (harness/resp.py), for the many small admin
# commands of a slot move (a redis-cli process per command costs more).
Conn = RespConnection


def key_slot(key: str) -> int:
    """Redis Cluster's hash slot of `key` (hash tags included)."""
    k = key.encode()
    lo = k.find(b"{")
    if lo >= 0:
        hi = k.find(b"}", lo + 1)
        if hi > lo + 1:
            k = k[lo + 1:hi]
    return binascii.crc_hqx(k, 0) % SLOTS


def meta_key(hex_key: str) -> str:
    """The kcache key whose slot holds the entry (storage/redis/backend.hpp)."""
    return f"kcache:{{{hex_key}}}:meta"


class RedisCluster:
    """`masters` masters with `replicas` replicas each, joined by
    `redis-cli --cluster create --cluster-replicas <replicas>`."""

    def __init__(self, tmp: pathlib.Path, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 3000,
                 extra_args: list[str] | None = None) -> None:
        self.tmp = tmp
        self.node_timeout_ms = node_timeout_ms
        self.extra_args = extra_args or []
        self.procs: dict[int, subprocess.Popen] = {}
        self.dirs: dict[int, pathlib.Path] = {}
        try:
            while len(self.procs) < masters * (1 + replicas):
                self._start_node()
            self.ports = list(self.procs)
            created = subprocess.run([REDIS_CLI, "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
                                      "--cluster-replicas", str(replicas), "--cluster-yes"],
                                     capture_output=True, text=True, timeout=60)
            if created.returncode != 0:
                raise RuntimeError(created.stdout + created.stderr)
            self.wait_ok()
        except BaseException:
            self.stop()
            raise

    def node_args(self, port: int) -> list[str]:
        return [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", str(self.node_timeout_ms),
                "--dir", str(self.dirs[port]), "--save", "", "--appendonly", "no",
                "--repl-diskless-sync-delay", "0", *self.extra_args]

    def _start_node(self) -> int | None:
        port = free_port()
        self.dirs[port] = self.tmp / str(port)
        self.dirs[port].mkdir(parents=True, exist_ok=True)
        p = subprocess.Popen(self.node_args(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self._wait_pong(port, p):
            self.procs[port] = p
            return port
        shutil.rmtree(self.dirs.pop(port), ignore_errors=True)
        return None

    @staticmethod
    def _wait_pong(port: int, proc: subprocess.Popen) -> bool:
        for _ in range(500):
            if proc.poll() is not None:
                return False  # the port was taken meanwhile
            # Ours, not another test's node that took the port first.
            if f"process_id:{proc.pid}" in cli(port, "INFO", "server").split():
                return True
            time.sleep(0.01)
        proc.kill()
        proc.wait(10)
        return False

    def wait_ok(self, limit: float = 30) -> None:
        deadline = time.monotonic() + limit
        while not all("cluster_state:ok" in cli(p, "CLUSTER", "INFO") for p in self.procs):
            if time.monotonic() > deadline:
                raise RuntimeError("cluster never reached cluster_state:ok")
            time.sleep(0.05)

    def wait_seen_up(self, port: int, limit: float = 30) -> None:
        """Until no node flags node `port` as failing (`fail?` or `fail` in
        CLUSTER NODES) and every node says cluster_state:ok. A node that was
        down longer than the node timeout stays flagged until its pings reach
        each node again; one made master meanwhile (CLUSTER FAILOVER) would
        leave its slots served by a FAIL node in those nodes' view, and they
        answer CLUSTERDOWN until the flag clears (two node timeouts for a
        master). Wait for this before handing a restarted node its shard."""
        deadline = time.monotonic() + limit
        addr = f"127.0.0.1:{port}@"
        while True:
            flagged = [p for p in self.procs for line in cli(p, "CLUSTER", "NODES").splitlines()
                       if line.split()[1:2] and line.split()[1].startswith(addr) and "fail" in line.split()[2]]
            if not flagged and all("cluster_state:ok" in cli(p, "CLUSTER", "INFO") for p in self.procs):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {port} is still flagged failing by {flagged}")
            time.sleep(0.05)

    def wait_agreed(self, limit: float = 30) -> None:
        """Until `redis-cli --cluster check` finds every node agreeing on the
        slot map and every slot covered (what redis-cli's own add-node and
        reshard insist on before they act)."""
        deadline = time.monotonic() + limit
        while True:
            out = subprocess.run([REDIS_CLI, "--cluster", "check", f"127.0.0.1:{self.ports[0]}"],
                                 capture_output=True, text=True, timeout=60).stdout
            if "[OK] All nodes agree about slots configuration." in out and "[OK] All 16384 slots covered." in out:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the nodes never agreed on the slot map: " + out[-2000:])
            time.sleep(0.1)

    def cluster_cli(self, *args: str, timeout: float = 120, input: str | None = None,
                    limit: float = 60) -> subprocess.CompletedProcess:
        """`redis-cli --cluster <args>`, run again while it refuses because
        the nodes do not agree yet. add-node and reshard check the cluster
        before they act and stop at the first disagreement; gossip can still
        be settling a moment after `wait_agreed` saw agreement from one node
        (a replica just added, seen from another master), so one refusal is
        not a failure. Anything else is returned as it is."""
        deadline = time.monotonic() + limit
        while True:
            done = subprocess.run([REDIS_CLI, "--cluster", *args], capture_output=True, text=True,
                                  timeout=timeout, input=input)
            refused = "Nodes don't agree" in done.stdout or "Please fix your cluster problems" in done.stdout
            if done.returncode == 0 or not refused or time.monotonic() > deadline:
                return done
            self.wait_agreed()

    def url(self, first: int | None = None, query: str = "?connect_timeout_ms=500&timeout_ms=5000") -> str:
        """A URL whose first seed is node `first` (where that server subscribes).
        A 5 s operation timeout: a master busy with a replica's full sync on a
        loaded machine can take past 2 s to answer a 2 MB write."""
        first = self.ports[0] if first is None else first
        order = [first] + [p for p in self.ports if p != first]
        return "redis-cluster://" + ",".join(f"127.0.0.1:{p}" for p in order) + "/" + query

    def role(self, port: int) -> str:
        return cli(port, "ROLE").split("\n", 1)[0]

    def masters(self) -> list[int]:
        return [p for p in self.ports if self.role(p) == "master"]

    def node_id(self, port: int) -> str:
        return cli(port, "CLUSTER", "MYID").strip()

    def owner(self, slot: int, via: int | None = None) -> int:
        """The port of the master serving `slot`, as node `via` (default: the
        first) sees it in CLUSTER NODES."""
        for line in cli(self.ports[0] if via is None else via, "CLUSTER", "NODES").splitlines():
            f = line.split()
            if "master" not in f[2]:
                continue
            for r in f[8:]:
                if r.startswith("["):
                    continue  # a slot mid-migration, as this node sees it
                lo, _, hi = r.partition("-")
                if int(lo) <= slot <= int(hi or lo):
                    return int(f[1].split("@")[0].rsplit(":", 1)[1])
        raise AssertionError(f"no master serves slot {slot}")

    def add_master(self) -> int:
        """A new, empty master joined with `redis-cli --cluster add-node`;
        returns once every node knows it."""
        port = None
        while port is None:
            port = self._start_node()
        added = self.cluster_cli("add-node", f"127.0.0.1:{port}", f"127.0.0.1:{self.ports[0]}")
        if added.returncode != 0:
            raise RuntimeError(added.stdout + added.stderr)
        self.ports.append(port)
        new_id = self.node_id(port)
        deadline = time.monotonic() + 30
        while not all(new_id in cli(p, "CLUSTER", "NODES") for p in self.procs):
            if time.monotonic() > deadline:
                raise RuntimeError("the new master was never known to every node")
            time.sleep(0.05)
        self.wait_ok()
        return port

    def move_slot(self, slot: int, src: int, dst: int, pause_s: float = 0.0, masters: list[int] | None = None) -> int:
        """Moves `slot` from master `src` to master `dst` the way
        `redis-cli --cluster reshard` does (IMPORTING on the target,
        MIGRATING on the source, MIGRATE until the slot is empty, SETSLOT
        NODE on the target, the source, then every other master), but one
        key per MIGRATE with `pause_s` after each, so the slot stays split
        between the two nodes long enough to be seen. Returns the keys moved."""
        masters = masters if masters is not None else self.masters()
        conns = {p: Conn(p) for p in {src, dst, *masters}}
        try:
            src_id, dst_id = conns[src].call("CLUSTER", "MYID"), conns[dst].call("CLUSTER", "MYID")
            conns[dst].call("CLUSTER", "SETSLOT", str(slot), "IMPORTING", src_id)
            conns[src].call("CLUSTER", "SETSLOT", str(slot), "MIGRATING", dst_id)
            moved = 0
            while keys := conns[src].call("CLUSTER", "GETKEYSINSLOT", str(slot), "1"):
                conns[src].call("MIGRATE", "127.0.0.1", str(dst), "", "0", "5000", "REPLACE", "KEYS", keys[0])
                moved += 1
                if pause_s:
                    time.sleep(pause_s)
            for p in [dst, src] + [m for m in masters if m not in (src, dst)]:
                conns[p].call("CLUSTER", "SETSLOT", str(slot), "NODE", dst_id)
            return moved
        finally:
            for c in conns.values():
                c.close()

    def replica_of(self, master: int) -> int:
        """The port of a replica whose master is `master`."""
        for p in self.procs:
            role = cli(p, "ROLE").split()
            if role[:1] == ["slave"] and int(role[2]) == master:
                return p
        raise AssertionError(f"no replica of {master}")

    def wait_synced(self, replica: int, limit: float = 30) -> None:
        """Until `replica` is connected to its master and has caught up with
        it: its offset (ROLE) reaches the master's offset as it was once the
        link was up (the master's keeps moving under load)."""
        deadline = time.monotonic() + limit
        target = None
        while True:
            role = cli(replica, "ROLE").split()
            if role[:1] == ["slave"] and role[3:4] == ["connected"]:
                if target is None:
                    target = int(cli(int(role[2]), "ROLE").split()[1])
                if int(role[4]) >= target:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica {replica} never caught up: {role}")
            time.sleep(0.05)

    def restart_node(self, port: int) -> None:
        """Stops node `port` (SIGTERM: a clean shutdown) and starts it again
        on its port and directory, as an upgrade to a new redis-server
        binary would; its nodes.conf brings it back into the cluster."""
        p = self.procs.pop(port)
        p.terminate()
        p.wait(30)
        self.procs[port] = subprocess.Popen(self.node_args(port), stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while f"process_id:{self.procs[port].pid}" not in cli(port, "INFO", "server").split():
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {port} did not come back")
            time.sleep(0.02)

    @classmethod
    def restore(cls, tmp: pathlib.Path, dumps: list[pathlib.Path], replicas: int = 1,
                node_timeout_ms: int = 3000) -> "RedisCluster":
        """A new cluster from one RDB file per master of an old one: each new
        master starts, alone, on a copy of one dump (no nodes.conf) and
        claims the slots it finds keys for; CLUSTER MEET joins them,
        `redis-cli --cluster fix` gives the slots no dump had keys in to
        some master, and empty replicas are added with
        `redis-cli --cluster add-node --cluster-slave`."""
        c = cls.__new__(cls)
        c.tmp, c.node_timeout_ms, c.extra_args = tmp, node_timeout_ms, []
        c.procs, c.dirs = {}, {}
        try:
            for dump in dumps:
                port = None
                while port is None:
                    port = free_port()
                    c.dirs[port] = tmp / str(port)
                    c.dirs[port].mkdir(parents=True, exist_ok=True)
                    shutil.copy(dump, c.dirs[port] / "dump.rdb")
                    proc = subprocess.Popen(c.node_args(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    if c._wait_pong(port, proc):
                        c.procs[port] = proc
                    else:
                        shutil.rmtree(c.dirs.pop(port), ignore_errors=True)
                        port = None
            c.ports = list(c.procs)
            first = c.ports[0]
            for p in c.ports[1:]:
                cli(p, "CLUSTER", "MEET", "127.0.0.1", str(first))
            # Until every node knows every other and they agree on who has
            # which slot (the claims travel by gossip). A MEET whose handshake
            # does not finish within the node timeout (a loaded machine) is
            # dropped by Redis, so a node that still misses a peer meets again.
            deadline = time.monotonic() + 60
            met = time.monotonic()
            while True:
                infos = [cli(p, "CLUSTER", "INFO") for p in c.ports]
                if time.monotonic() - met > 2 * node_timeout_ms / 1000:
                    met = time.monotonic()
                    for p, i in zip(c.ports[1:], infos[1:]):
                        if f"cluster_known_nodes:{len(c.ports)}" not in i:
                            cli(p, "CLUSTER", "MEET", "127.0.0.1", str(first))
                assigned = {line for i in infos for line in i.splitlines() if line.startswith("cluster_slots_assigned")}
                if all(f"cluster_known_nodes:{len(c.ports)}" in i for i in infos) and len(assigned) == 1 and \
                        "Nodes don't agree" not in subprocess.run(
                            [REDIS_CLI, "--cluster", "check", f"127.0.0.1:{first}"], capture_output=True,
                            text=True, timeout=60).stdout:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the restored masters never agreed on their slots: " + "; ".join(
                        f"{p}: " + " ".join(line for line in i.splitlines() if line.startswith(
                            ("cluster_known_nodes", "cluster_slots_assigned", "cluster_state")))
                        for p, i in zip(c.ports, infos)))
                time.sleep(0.1)
            # Covering slots is a question --cluster-yes does not answer: say yes on stdin.
            fixed = subprocess.run([REDIS_CLI, "--cluster", "fix", f"127.0.0.1:{first}", "--cluster-yes"],
                                   input="yes\n" * 4, capture_output=True, text=True, timeout=120)
            if fixed.returncode != 0:
                raise RuntimeError(fixed.stdout[-3000:] + fixed.stderr[-3000:])
            c.wait_agreed()
            for m in list(c.ports):
                mid = c.node_id(m)
                for _ in range(replicas):
                    r = None
                    while r is None:
                        r = c._start_node()
                    added = c.cluster_cli("add-node", f"127.0.0.1:{r}", f"127.0.0.1:{m}",
                                          "--cluster-slave", "--cluster-master-id", mid)
                    if added.returncode != 0:
                        raise RuntimeError(added.stdout[-2000:] + added.stderr[-2000:])
                    c.ports.append(r)
                    c.wait_agreed()
            c.wait_ok()
            return c
        except BaseException:
            c.stop()
            raise

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(10)
        self.procs.clear()
        for d in self.dirs.values():
            shutil.rmtree(d, ignore_errors=True)  # nodes.conf and any dump
