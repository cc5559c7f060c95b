"""A rank's compile worker (docs/cold-start.md): `python -m
kcache.tools.compile_worker RESULT_FD`, started by kcache.background.

It reads jobs from stdin (kcache.background.wire: a hello with the rank's
sys.path, then one message per region key), rebuilds each block from its
skeleton (kcache.background.skeleton) under the rank's grad mode, autocast
and compile configs, and runs the precompiled path's own fetch-or-compile
(kcache.precompiled.variants.function_for) through a store that does not
wait (a traced graph's job, entry "graph", carries the graph itself:
kcache.traced.offthread.compile_and_store): a region whose lease another process holds is put back and the next
one taken, so that the ranks of a cold cluster compile different regions
at once. It reports on RESULT_FD:

- {"kind": "compiling", "key"}: it took the lease and compiles now (the
  rank's deadline counts from here);
- {"kind": "done", "key", "compile_seconds", "by", "kernels"}: stored
  (compiled here, or by another process), so the rank's next call fetches
  it; "kernels" counts the kernel libraries its compile built here and
  those it installed from another worker (kcache.background.shared_kernels);
- {"kind": "refused", "key", "reason"}: it computed another key for the
  block than the rank did (something the skeleton does not carry changes
  the code), its classes differ in members it could not copy, or
  rebuilding or compiling the block raised: the rank compiles that region
  itself, on its usual path (which falls back to the traced path on an
  error, as before).

When its stdin closes (the rank ended or died) it finishes the compile in
hand, if any, so that what it holds a lease for is stored for the next
start, and exits without taking another; killed, its lease ends with the
server's TTL.
"""

from __future__ import annotations

import logging
import os
import queue
import resource
import sys
import threading

from kcache import settings
from kcache.background import Busy, shared_kernels, wire
from kcache.background.nowait import TryStore
from kcache.background.skeleton import applied, rebuild
from kcache.precompiled import PrecompiledRegion, variants
from kcache.precompiled.spec import fast_spec
from kcache.state import store
from kcache.traced import offthread

log = logging.getLogger("kcache")
RETRY_S = 0.5


def _read_jobs(jobs: "queue.Queue[dict | None]", closing: threading.Event) -> None:
    while True:
        message = wire.read(0)
        if message is None:  # the rank is gone
            closing.set()
            jobs.put(None)
            return
        jobs.put(message)


def _no_traced(block):
    raise RuntimeError("the compile worker has no traced path")


class Worker:
    def __init__(self, out_fd: int) -> None:
        self.out_fd = out_fd
        self.client = store.get_store()
        self.lock = threading.Lock()
        self.kernels = shared_kernels.share(self.client) if settings.enabled("KCACHE_SHARE_KERNELS") else None

    def report(self, message: dict) -> None:
        with self.lock:
            wire.write(self.out_fd, message)

    def attempt(self, job: dict) -> bool:
        """One try at a job; False when its region is busy elsewhere."""
        if job.get("entry") == "graph":
            return self.attempt_graph(job)
        key = job["key"]
        try:
            if "rebuilt" not in job:
                job["rebuilt"] = rebuild(job.pop("payload"))
            block, args, kwargs, context = job["rebuilt"]
            if context["classes_differ"]:
                self.report({"kind": "refused", "key": key, "reason": (
                    "the compile worker's classes differ from the rank's in "
                    + ", ".join(context["classes_differ"][:5]) + " (members it could not copy)")})
                return True
            region = PrecompiledRegion(job["region"], job["settings"], self.client, traced=_no_traced,
                                       entry=job["entry"])
            # One TryStore per job, kept across its attempts: what an earlier
            # attempt fetched (this machine's facts, the index) is not asked
            # for again, and still counts as keyed by this job.
            if "tries" not in job:
                job["tries"] = TryStore(self.client, lambda k: self.report({"kind": "compiling", "key": k}))
            tries = region.builds = job["tries"]
            spent = self.client.stats()["compile_seconds_spent"]
            kernels = self.kernels.totals() if self.kernels else {}
            with applied(context) as unset:
                spec = (block.training, fast_spec(args, kwargs))
                variants.function_for(region, block, spec, args, kwargs)
        except Busy:
            return False
        except Exception as e:  # noqa: BLE001 - the rank takes the region back
            self.report({"kind": "refused", "key": key,
                         "reason": f"the compile worker failed on it ({type(e).__name__}: {e})"})
            return True
        if key not in tries.asked:
            self.report({"kind": "refused", "key": key, "reason": (
                f"the compile worker keyed the block {', '.join(k[:12] for k in tries.asked)}, "
                f"not {key[:12]}" + (f" (configs it could not set: {', '.join(unset)})" if unset else ""))})
            return True
        self.done(key, spent, kernels)
        return True

    def attempt_graph(self, job: dict) -> bool:
        """One try at a traced graph (kcache.traced.offthread): the carried
        graph compiled and stored; False when its region is busy elsewhere."""
        key = job["key"]
        if "tries" not in job:
            job["tries"] = TryStore(self.client, lambda k: self.report({"kind": "compiling", "key": k}))
        spent = self.client.stats()["compile_seconds_spent"]
        kernels = self.kernels.totals() if self.kernels else {}
        try:
            with applied(job["context"]):
                offthread.compile_and_store(job["tries"], key, job["explanation"], job["payload"],
                                            job["settings"])
        except Busy:
            return False
        except Exception as e:  # noqa: BLE001 - the rank takes the region back
            self.report({"kind": "refused", "key": key,
                         "reason": f"the compile worker failed on its graph ({type(e).__name__}: {e})"})
            return True
        self.done(key, spent, kernels)
        return True

    def done(self, key: str, spent: float, kernels: dict) -> None:
        """Reports a job's region stored, with the compile seconds it cost here."""
        # A kernel library built inside the region's compile counts in both
        # compile callbacks' seconds: once is enough.
        now = self.kernels.totals() if self.kernels else {}
        built_s = now.get("build_seconds", 0.0) - kernels.get("build_seconds", 0.0)
        seconds = self.client.stats()["compile_seconds_spent"] - spent - built_s
        self.report({"kind": "done", "key": key, "compile_seconds": seconds,
                     "by": "this rank's worker" if seconds > 0 else "another process",
                     "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                     "kernels": {k: now[k] - kernels[k] for k in ("built", "fetched", "refused")} if now else {}})

    def run(self) -> None:
        jobs: queue.Queue[dict | None] = queue.Queue()
        hello = wire.read(0)
        if hello is None:
            return
        for path in reversed(hello.get("sys_path", [])):
            if path not in sys.path:
                sys.path.insert(0, path)
        closing = threading.Event()
        threading.Thread(target=_read_jobs, args=(jobs, closing), daemon=True).start()
        waiting: list[dict] = []
        while not closing.is_set():
            try:
                waiting.append(jobs.get(timeout=RETRY_S if waiting else None))
                while True:
                    waiting.append(jobs.get_nowait())
            except queue.Empty:
                pass
            # A region in another process's hands waits for the next round
            # (at most RETRY_S, or sooner when a new job comes).
            still = []
            for job in waiting:
                if job is not None and (closing.is_set() or not self.attempt(job)):
                    still.append(job)
            waiting = still


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="kcache compile worker %(process)d: %(message)s")
    Worker(int(argv[1])).run()
    os._exit(0)  # without waiting for PyTorch's compile threads or atexit work


if __name__ == "__main__":
    sys.exit(main(sys.argv))
