"""The rank's cold-start counters, added to the server's metrics.

Only the rank knows how many of its block calls ran eagerly while a
region compiled elsewhere, when a region switched, what its worker spent
compiling, what was refused or lost to a fault. `ServerReport` sends the
increments since its last report (POST /v1/cold-start, docs/protocol.md)
after each of those events, on a thread of its own (the training thread
never waits on the server), and once more when the process exits; the
server adds them to `kcache_eager_block_calls_total` and the others
(docs/cold-start.md, "Observing it"). A report the server did not take is
not retried (a repeat would count twice): its increments go with the next.
"""

from __future__ import annotations

import atexit
import json
import threading

from kcache.state import counters

FIELDS = ("eager_block_calls", "regions_switched", "background_compile_seconds", "background_refusals",
          "background_faults")


class ServerReport:
    def __init__(self, client) -> None:
        self.client = client
        self.sent = {f: 0 for f in FIELDS}
        self.lock = threading.Lock()
        atexit.register(self.flush)

    def flush(self) -> bool:
        """Sends what changed since the last report the server took; True
        when it took this one (or there was nothing to send)."""
        with self.lock:
            stats = counters.get()
            now = {f: getattr(stats, f) for f in FIELDS}
            delta = {f: round(now[f] - self.sent[f], 3) if isinstance(now[f], float) else now[f] - self.sent[f]
                     for f in FIELDS if now[f] != self.sent[f]}
            if not delta:
                return True
            if any(v < 0 for v in delta.values()):  # the counters were reset: start again from here
                self.sent = now
                return True
            if not self.client.report_cold_start(json.dumps(delta)):
                return False
            self.sent = now
            return True

    def soon(self) -> None:
        threading.Thread(target=self.flush, name="kcache-cold-start-report", daemon=True).start()
