"""Where a cold start's compile runs: in a worker beside the training, or
in the training's own first call (wait), decided from what the process can
see, once per device type of the blocks (docs/cold-start.md, "Which mode").

A worker pays off when it compiles on cores the training does not use: on a
GPU node the training runs on the GPU and the host's cores are idle, and a
CPU job may leave cores free. When the worker would share the training's
cores (a CPU job whose threads take every core it may run on), a worker
at normal priority slows the eager phase and compiles slowly, and one at
idle priority gets no cycle at all: measured on the README's demo
(bench/coldstart/REPORT_placement.md, docs/cold-start.md "Which mode"),
wait completes more steps by 300 s than the first, and the second never
compiles (nothing stored, every restart cold), so unset KCACHE_COLD_START
picks wait there.

What is read:
- the device type of the block's tensors (cpu, cuda, xpu, ...);
- the process's CPU affinity (os.sched_getaffinity) and the machine's
  online CPUs (os.cpu_count);
- torch's intra-op threads (torch.get_num_threads) and the ranks on this
  node (LOCAL_WORLD_SIZE, set by torchrun and Accelerate): when the process
  may run on every CPU, its node's ranks are taken to share them all;
- KCACHE_WORKER_CPUS: cores named for the worker (the worker is pinned to
  them); KCACHE_WORKER_PRIORITY: normal, or idle (SCHED_IDLE: the worker
  runs only when the training leaves a core idle).

KCACHE_COLD_START=background or wait overrides the decision.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


class PlacementError(ValueError):
    """A malformed KCACHE_WORKER_CPUS or KCACHE_WORKER_PRIORITY."""


# Measured (bench/coldstart/REPORT_placement.md): when the worker would share
# the training's cores, wait is the mode that compiles with the most steps by 300 s.
SHARED_CORES_MODE = "wait"
PRIORITIES = ("normal", "idle")
MAX_CPUS = 8192  # Linux's largest CPU number (NR_CPUS): a bigger one is a typo, not a core


@dataclass(frozen=True)
class Host:
    """What the decision reads, gathered once (tests build their own)."""
    affinity: frozenset[int]
    online: int
    threads: int
    local_ranks: int

    @staticmethod
    def here() -> "Host":
        import torch

        try:
            local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or "1")
        except ValueError:
            local = 1
        return Host(frozenset(os.sched_getaffinity(0)), os.cpu_count() or 1,
                    max(1, torch.get_num_threads()), max(1, local))

    def spare_cores(self) -> int:
        """Cores this process may run on that the training's threads leave
        free (the node's ranks' threads, when they all share every CPU)."""
        sharing = self.local_ranks if len(self.affinity) >= self.online else 1
        return len(self.affinity) - self.threads * sharing


@dataclass(frozen=True)
class Placement:
    mode: str  # "background" or "wait"
    reason: str
    worker_cpus: frozenset[int] | None = None  # None: the worker inherits the rank's affinity
    priority: str = "normal"


def parse_cpus(text: str) -> frozenset[int] | None:
    """A CPU list as taskset and cgroups write it ("1", "2-15,17"); None for
    an empty one."""
    text = text.strip()
    if not text:
        return None
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, dash, hi = part.strip().partition("-")
            first, last = int(lo), int(hi) if dash else int(lo)
            if first < 0 or last < first or last >= MAX_CPUS:
                raise ValueError(part)
            cpus.update(range(first, last + 1))
    except ValueError:
        raise PlacementError(f"KCACHE_WORKER_CPUS must be a CPU list such as 1 or 2-15,17, not '{text}'") \
            from None
    return frozenset(cpus)


def parse_priority(text: str) -> str:
    p = text.strip().lower() or "normal"
    if p not in PRIORITIES:
        raise PlacementError(f"KCACHE_WORKER_PRIORITY must be normal or idle, not '{text}'")
    return p


def decide(device_type: str, asked: str, host: Host, worker_cpus: frozenset[int] | None,
           priority: str) -> Placement:
    """The placement for blocks on `device_type`, KCACHE_COLD_START being
    `asked` ("", "background" or "wait")."""
    if asked == "wait":
        return Placement("wait", "KCACHE_COLD_START=wait")
    if asked == "background":
        return Placement("background", "KCACHE_COLD_START=background", worker_cpus, priority)
    if device_type != "cpu":
        return Placement("background", f"the blocks run on {device_type}: the host's cores are free "
                         "for the compile worker", worker_cpus, priority)
    if worker_cpus is not None and not worker_cpus & host.affinity:
        return Placement("background", f"KCACHE_WORKER_CPUS gives the compile worker {len(worker_cpus)} "
                         "core(s) the training does not run on", worker_cpus, priority)
    spare = host.spare_cores()
    if spare >= 1:
        return Placement("background", f"{spare} of the {len(host.affinity)} cores this process may use "
                         f"are left free by the training's {host.threads} thread(s) x {host.local_ranks} "
                         "rank(s)", worker_cpus, priority)
    why = (f"the blocks run on the CPU and the training's {host.threads} thread(s) x "
           f"{host.local_ranks} rank(s) use all {len(host.affinity)} cores this process may use: a "
           "compile worker would share them")
    if SHARED_CORES_MODE == "wait":
        return Placement("wait", why + "; set KCACHE_COLD_START=background, or KCACHE_WORKER_CPUS to "
                         "cores of its own, to use one anyway")
    return Placement("background", why + "; it runs at idle priority", worker_cpus, "idle")


def apply(pid: int, placement: Placement) -> None:
    """Pins and deprioritizes the worker process `pid` (just started: one
    thread, which every later thread and host-compiler run inherits)."""
    if placement.worker_cpus is not None:
        os.sched_setaffinity(pid, placement.worker_cpus)
    if placement.priority == "idle":
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
