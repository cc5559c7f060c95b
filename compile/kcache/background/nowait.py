"""The stores a region builds through when compiles run in a worker.

On the rank: NoWaitStore fetches a stored key (node tier, then the server,
without waiting on anyone's lease) and raises NotReady for a missing one,
so that the block runs eagerly while the worker builds it. A key the
coordinator has settled (the worker reported it stored, or gave it back)
goes through the client's get_or_compile as before, and so do the keys
its compile asks for.

In the worker: TryStore is get_or_compile without waiting: a key whose
lease another process holds raises Busy, and the worker takes another
region first.
"""

from __future__ import annotations

import contextlib
from typing import Callable


class NotReady(Exception):
    """The region's key is not stored yet: run the block eagerly."""

    def __init__(self, key: str, explanation: str | None) -> None:
        super().__init__(f"{key[:12]} not stored yet")
        self.key, self.explanation = key, explanation


class Busy(Exception):
    """Another process holds the key's lease (it is compiling it)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key[:12]} is being compiled elsewhere")
        self.key = key


class NoWaitStore:
    def __init__(self, client, settled: Callable[[str], bool]) -> None:
        self.client = client
        self.settled = settled
        self.within = 0  # depth of settled keys' compiles in progress (the training thread's)

    @contextlib.contextmanager
    def waiting(self):
        """Every key asked inside is fetched or compiled as in wait mode: a
        block that cannot go to the worker compiles here, whichever keys its
        compile asks for (this machine's facts, an index, its variants)."""
        self.within += 1
        try:
            yield
        finally:
            self.within -= 1

    def get_or_compile(self, key: str, compile_fn, explanation: str | None = None):
        # A settled key compiles here as in wait mode, and so does every key
        # its compile asks for (a precompiled region's variants under its
        # index): raising NotReady there would lose the whole compile, the
        # fallback it records included, and a restart would repeat it.
        if self.settled(key) or self.within:
            self.within += 1
            try:
                return self.client.get_or_compile(key, compile_fn, explanation)
            finally:
                self.within -= 1
        hit = self.client.lookup(key)
        if hit is None:
            raise NotReady(key, explanation)
        return hit


class TryStore:
    def __init__(self, client, on_compile: Callable[[str], None] = lambda key: None) -> None:
        self.client = client
        self.on_compile = on_compile  # told when this process starts compiling a key
        self.asked: list[str] = []

    def get_or_compile(self, key: str, compile_fn, explanation: str | None = None):
        self.asked.append(key)

        def compile_here() -> bytes:
            self.on_compile(key)
            return compile_fn()

        got = self.client.try_get_or_compile(key, compile_here, explanation)
        if got is None:
            raise Busy(key)
        return got
