"""The rank's side of cold start without waiting: every region key in
hand, the compile worker, and when each block switches.

A key goes through these states:
- pending: sent to this rank's worker, which compiles it (holding its
  lease) or waits for whichever process holds it, taking other regions
  first; the blocks run eagerly;
- landed: the worker reports it stored (compiled there, or by another
  process); the blocks' next call fetches it through the usual path (node
  tier, portable checks on the live block) and switches;
- on the wait path: the worker cannot take the block (NotReproducible:
  its class is in `__main__`, it does not pickle, ...) or computed another
  key for it: the block compiles in its first call as before (or waits on
  the process compiling it), said once;
- orphaned: the worker died, ran past KCACHE_WORKER_DEADLINE_S on it or
  grew past KCACHE_WORKER_MAX_RSS_MB: the blocks stay eager and the store
  is looked at every ORPHAN_LOOK_S for the region another process may
  store; said once, counted (background_faults).

Switches, refusals and faults are reported to the server's metrics with
the eager calls so far (report.py), on a thread of their own.

Nothing here waits: poll() reads whatever the worker has said and checks
its health. A block switches only outside autograd's backward, so a
checkpointed block's recomputation runs what its forward ran.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass, field

from kcache import settings
from kcache.state import counters, store

from . import placement as placing
from .nowait import NoWaitStore, NotReady
from .report import ServerReport
from .skeleton import NotReproducible, context, describe
from .worker_process import CompileWorker

log = logging.getLogger("kcache")

ORPHAN_LOOK_S = 10.0
HEALTH_EVERY_S = 0.5
MAX_RESPAWNS = 2


_forced: str | None = None
_said_mode: set[str] = set()


def _warn_once(msg: str, *args) -> None:
    if msg not in _said_mode:
        _said_mode.add(msg)
        log.warning(msg, *args)


def force(name: str) -> None:
    """Pins this process's mode whatever KCACHE_COLD_START says: a command
    whose whole point is to compile and store regions in its own process
    (kcache.prewarm) must not hand them to a worker and exit."""
    global _forced
    _forced = name


def mode(client) -> str:
    """"background" or "wait" (KCACHE_COLD_START; docs/cold-start.md)."""
    if _forced is not None:
        return _forced
    try:
        asked = str(settings.get("KCACHE_COLD_START")).lower()
    except settings.SettingError:
        asked = ""
    config = client.config
    if asked not in ("", "background", "wait"):
        _warn_once("kcache: KCACHE_COLD_START must be background or wait, not '%s'; waiting", asked)
        return "wait"
    if asked == "wait" or config.get("disabled"):
        return "wait"
    has_tier = bool(config.get("url")) or bool(config.get("local_dir"))
    if asked == "" and not config.get("url"):
        return "wait"
    if not has_tier:
        _warn_once("kcache: KCACHE_COLD_START=background needs a server or a node tier (the worker "
                   "hands regions over through them); waiting")
        return "wait"
    if store.environment() is None:
        _warn_once("kcache: cold start waits: the cache client was configured with options in code, "
                   "which a compile worker cannot repeat (configure it from KCACHE_* instead)")
        return "wait"
    return "background"


@dataclass
class Job:
    key: str
    region: str
    payload: bytes
    submitted: float
    settings: object = None  # the region's CompileSettings
    entry: str = "call"  # "graph": a traced graph (kcache.traced.offthread), payload its bytes
    explanation: str = ""
    context: dict | None = None  # a graph's grad mode, autocast, configs (skeleton.context)
    eager_calls: int = 0
    switched: float | None = None
    landed: float | None = None
    compile_seconds: float = 0.0
    by: str = ""
    reason: str = ""
    looked: float = field(default_factory=time.monotonic)
    worker_rss_mb: float | None = None  # the worker's peak RSS when it reported this region


class Background:
    def __init__(self, client) -> None:
        self.client = client
        self.store = NoWaitStore(client, self.settled)
        self.jobs: dict[str, Job] = {}  # every key in hand, whatever its state
        self.pending: set[str] = set()
        self.landed: set[str] = set()
        self.wait_path: set[str] = set()
        self.orphaned: set[str] = set()
        self.worker: CompileWorker | None = None
        self.respawns = 0
        self.checked = 0.0
        self.t0 = time.monotonic()
        self.t0_wall = time.time()  # the timeline's zero, on the wall clock (to line up ranks)
        self._said: set[str] = set()
        self.report = ServerReport(client) if client.config.get("url") else None
        self.eager_asked = -1  # eager_block_calls when compiling() was last asked
        self.placements: dict[str, placing.Placement] = {}  # device type -> where its compiles run
        self.worker_placement: placing.Placement | None = None

    def takes(self, device_type: str) -> bool:
        """Whether blocks on `device_type` go to the worker (placement.py
        decides once per device type, said once); False: they compile in
        their first call, as in wait mode."""
        found = self.placements.get(device_type)
        if found is None:
            found = self.placements[device_type] = _placement(device_type)
            (log.warning if found.mode == "wait" else log.info)(
                "kcache: cold start for blocks on %s: %s (%s)", device_type,
                "compile worker" if found.mode == "background" else "wait", found.reason)
            if found.mode == "background" and self.worker_placement is None:
                self.worker_placement = found
        return found.mode == "background"

    # ---- what the region asks ----
    def settled(self, key: str) -> bool:
        """Fetch-or-compile as before (no NotReady) for this key."""
        return key in self.landed or key in self.wait_path

    def submit(self, region, e: NotReady, block, args: tuple, kwargs: dict) -> bool:
        """Puts a missing region in the worker's hands (`region`: its
        PrecompiledRegion); False when the block must compile on this thread
        instead (said once, counted)."""
        if not self.takes(device_of(block, args, kwargs)):
            return False
        if e.key in self.jobs:
            return not self.settled(e.key)  # in hand already (another block of the region)
        try:
            payload = describe(block, args, kwargs, region.entry)
        except NotReproducible as why:
            self._wait_path(Job(e.key, region.name, b"", time.monotonic()), str(why))
            return False
        job = self.jobs[e.key] = Job(e.key, region.name, payload, time.monotonic(),
                                     settings=region.settings, entry=region.entry)
        counters.bump(background_jobs=1)
        self.pending.add(e.key)
        if not self._send(job):
            self._orphan([e.key], "the compile worker could not be started")
        return True

    def submit_graph(self, key: str, region: str, settings, blob: bytes, explanation: str) -> None:
        """Puts a traced graph (kcache.traced.offthread: carried, keyed
        again) in the worker's hands; NotReproducible where the job's
        settings cannot reach the worker (nothing is queued then)."""
        settings_now = context()
        job = self.jobs[key] = Job(key, region, blob, time.monotonic(), settings=settings, entry="graph",
                                   explanation=explanation, context=settings_now)
        counters.bump(background_jobs=1)
        self.pending.add(key)
        if not self._send(job):
            self._orphan([key], "the compile worker could not be started")

    def keep_on_thread(self, key: str, region: str, why: str) -> None:
        """A traced graph this rank compiles on its training thread, as in
        wait mode (said once per reason, counted)."""
        self._wait_path(Job(key, region, b"", time.monotonic(), entry="graph"), why)

    def ready(self, key: str, in_backward: bool) -> bool:
        """Whether a pending block should switch now (its next call fetches
        the region); an eager call otherwise, counted."""
        self.poll()
        job = self.jobs.get(key)
        if key in self.orphaned and job is not None and time.monotonic() - job.looked > ORPHAN_LOOK_S:
            job.looked = time.monotonic()
            if self.client.lookup(key) is not None:
                self._land(job, {"compile_seconds": 0.0, "by": "another process"})
        if self.settled(key) and not in_backward:
            if job is not None and key in self.landed and job.switched is None:
                self._switched(job)
            return True
        if job is not None:
            job.eager_calls += 1
        counters.bump(eager_block_calls=1)
        return False

    # ---- the worker ----
    def _send(self, job: Job) -> bool:
        if self.worker is None:
            if self.respawns > MAX_RESPAWNS:
                return False
            try:
                self.worker = CompileWorker(settings.kcache_variables(store.environment() or {}),
                                            f"{socket.gethostname()} pid {os.getpid()} compile worker",
                                            self.worker_placement)
            except OSError as e:
                self._say("spawn", "kcache: the compile worker did not start (%s)", e)
                return False
        return self.worker.send({"kind": "job", "key": job.key, "region": job.region,
                                 "payload": job.payload, "settings": job.settings, "entry": job.entry,
                                 "explanation": job.explanation, "context": job.context})

    def poll(self) -> None:
        """Reads the worker's reports and checks its health; never waits."""
        w = self.worker
        if w is None or not self.pending:
            return
        for m in w.messages():
            job = self.jobs.get(m.get("key", ""))
            if job is None or job.key not in self.pending:
                continue
            if m["kind"] == "done":
                self._land(job, m)
            elif m["kind"] == "refused":
                self._wait_path(job, m["reason"])
        if not self.pending:
            return
        code = w.exit_code()  # every time (one waitpid): a dead worker is seen at once
        now = time.monotonic()
        if code is None and now - self.checked < HEALTH_EVERY_S:
            return
        self.checked = now
        deadline = settings.number("KCACHE_WORKER_DEADLINE_S")
        limit = settings.number("KCACHE_WORKER_MAX_RSS_MB")
        if code is not None:
            why = f"the compile worker exited (code {code})"
        elif w.longest_compile() > deadline:
            why = f"the compile worker ran past KCACHE_WORKER_DEADLINE_S={deadline} on one region"
        elif w.rss_mb() > limit:
            why = f"the compile worker grew past KCACHE_WORKER_MAX_RSS_MB={limit} ({w.rss_mb():.0f} MB)"
        else:
            return
        # The region being compiled is orphaned; the others go to a new worker.
        lost = [k for k in self.pending if k in w.compiling] or list(self.pending)
        w.stop()
        self.worker = None
        self.respawns += 1
        self._orphan(lost, why)
        for key in list(self.pending):
            if not self._send(self.jobs[key]):
                self._orphan([key], "no compile worker left (" + why + ")")

    # ---- states ----
    def _land(self, job: Job, m: dict) -> None:
        self.pending.discard(job.key)
        self.orphaned.discard(job.key)
        self.landed.add(job.key)
        job.landed = time.monotonic() - self.t0
        job.compile_seconds = float(m.get("compile_seconds", 0.0))
        job.by = m.get("by", "this rank's worker")
        job.worker_rss_mb = m.get("peak_rss_mb")
        counters.bump(background_compile_seconds=job.compile_seconds)
        kernels = m.get("kernels") or {}
        counters.bump(background_kernels_built=int(kernels.get("built", 0)),
                      background_kernels_fetched=int(kernels.get("fetched", 0)),
                      background_kernels_refused=int(kernels.get("refused", 0)))

    def _switched(self, job: Job) -> None:
        counters.bump(regions_switched=1)
        self._report()
        job.switched = time.monotonic() - self.t0
        log.info("kcache: region %s (%s) switched to compiled after %.1f s and %d eager calls",
                 job.region, job.key[:12], time.monotonic() - job.submitted, job.eager_calls)

    def _wait_path(self, job: Job, why: str) -> None:
        self.jobs[job.key] = job
        self.pending.discard(job.key)
        self.wait_path.add(job.key)
        job.reason = why
        counters.bump(background_refusals=1)
        self._report()
        self._say(why, "kcache: region %s compiles on the training thread: %s", job.region, why)

    def _orphan(self, keys: list[str], why: str) -> None:
        for key in keys:
            self.pending.discard(key)
            self.orphaned.add(key)
            self.jobs[key].reason = why
            counters.bump(background_faults=1)
        self._report()
        self._say(why, "kcache: %s; %d region(s) stay eager until another process stores them",
                  why, len(keys))

    def _report(self) -> None:
        """The server's counters, after an event (kcache/background/report.py)."""
        if self.report is not None:
            self.report.soon()

    def _say(self, what: str, msg: str, *args) -> None:
        if what not in self._said:
            self._said.add(what)
            log.warning(msg, *args)

    def timeline(self) -> list[dict]:
        """Each region in hand: submitted and landed (seconds since this
        rank's first), eager calls, its compile seconds, and its state."""
        out = []
        for job in self.jobs.values():
            state = ("pending" if job.key in self.pending else "orphaned" if job.key in self.orphaned
                     else "wait path" if job.key in self.wait_path else
                     "switched" if job.switched is not None else "landed")
            out.append({"key": job.key, "region": job.region, "state": state,
                        "path": "traced" if job.entry == "graph" else "precompiled",
                        "submitted_s": round(job.submitted - self.t0, 3),
                        "landed_s": None if job.landed is None else round(job.landed, 3),
                        "switched_s": None if job.switched is None else round(job.switched, 3),
                        "eager_calls": job.eager_calls,
                        "compile_seconds": round(job.compile_seconds, 3), "by": job.by,
                        "worker_peak_rss_mb": job.worker_rss_mb,
                        "note": job.reason})
        return out


def device_of(block, args: tuple, kwargs: dict) -> str:
    """The device type a block's call runs on: its first tensor argument's,
    else its first parameter's, else cpu."""
    import torch

    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device.type
    for p in block.parameters():
        return p.device.type
    return "cpu"


def _placement(device_type: str) -> placing.Placement:
    """placement.decide with this process's settings and host (a malformed
    worker setting is said once and left at its default)."""
    try:
        asked = str(settings.get("KCACHE_COLD_START")).lower()
    except settings.SettingError:
        asked = ""
    try:
        cpus = placing.parse_cpus(str(settings.get("KCACHE_WORKER_CPUS")))
    except placing.PlacementError as e:
        _warn_once("kcache: %s; the worker runs where the training may", e)
        cpus = None
    try:
        priority = placing.parse_priority(str(settings.get("KCACHE_WORKER_PRIORITY")))
    except placing.PlacementError as e:
        _warn_once("kcache: %s; normal", e)
        priority = "normal"
    return placing.decide(device_type, asked, placing.Host.here(), cpus, priority)


_instance: Background | None = None


def for_store(client) -> Background | None:
    """This process's Background for `client`, or None in wait mode."""
    global _instance
    if _instance is not None and _instance.client is client:
        return _instance
    if mode(client) != "background":
        return None
    _instance = Background(client)
    return _instance


def current() -> Background | None:
    return _instance


def compiling() -> bool:
    """Some block of this process still runs eagerly, waiting for its
    region: one in a worker's hands, or landed and not yet switched (a job
    that trains on until every block runs compiled asks this, once a step).
    A landed region switches at its blocks' next call, but they may never
    call it again (a traced graph whose frame Dynamo recompiled for other
    shapes; a train-mode region that landed after the job switched to
    eval), so it counts only while block calls still run eagerly: until a
    step passes between two asks with none."""
    bg = _instance
    if bg is None:
        return False
    eager = counters.get().eager_block_calls
    ran_eagerly, bg.eager_asked = eager != bg.eager_asked, eager
    unswitched = [job for key, job in bg.jobs.items() if key in bg.landed and job.switched is None]
    return bool(bg.pending) or (bool(unswitched) and ran_eagerly)
