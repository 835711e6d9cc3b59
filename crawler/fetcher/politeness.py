"""Politeness shared by every fetch of one process: one request cap, and per-queue starts and delays.

The daemon fetches several segments at once (no idle tail), each with its own
``Fetcher`` and host queues. On their own, two fetches could each have
``fetcher.concurrency`` requests in flight, and each would space a host only by
its own requests. Given one ``SharedPoliteness``, their queues make the limits
hold for the whole process: at most ``fetcher.concurrency`` requests in flight
in total, at most ``per_host_concurrency`` to one queue key, and no request
start to a queue key before the latest time any fetch allows (its delay after
the last start, a robots Crawl-delay learned by any fetch, a Retry-After).
So keeping a running fetch's hosts out of the next segment is an optimisation,
not what politeness rests on.

Memory follows the busy queue keys: a key is forgotten once nothing is in
flight to it and its time has passed.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from crawler.config import FetcherConfig

FORGET_EVERY = 1024  # request starts between two sweeps of forgotten keys


class RequestSlots:
    """A FIFO semaphore whose limit can change while slots are held (SIGHUP)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self.used < self.limit and not self._waiters:
            self.used += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # granted just as we were cancelled: hand it on
            else:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.used -= 1
        self._grant()

    def set_limit(self, limit: int) -> None:
        self.limit = limit
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self.used < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.used += 1
                waiter.set_result(None)


@dataclass(slots=True)
class _Key:
    in_flight: int = 0
    next_allowed: float = 0.0
    crawl_delay: float | None = None
    waiters: list[Callable[[], None]] = field(default_factory=list)


class SharedPoliteness:
    def __init__(self, cfg: FetcherConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.slots = RequestSlots(cfg.concurrency)
        self.clock = clock
        self._keys: dict[str, _Key] = {}
        self._starts = 0

    def reconfigure(self, cfg: FetcherConfig) -> None:
        self.slots.set_limit(cfg.concurrency)

    def crawl_delay(self, key: str) -> float | None:
        state = self._keys.get(key)
        return state.crawl_delay if state is not None else None

    def wait(self, key: str, per_host: int, now: float) -> float | None:
        """None when a request to ``key`` may start now, else the time to look again (inf: on release)."""
        state = self._keys.get(key)
        if state is None:
            return None
        if state.in_flight >= per_host:
            return float("inf")
        return state.next_allowed if state.next_allowed > now else None

    def on_release(self, key: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, the next time a request to ``key`` ends (in any fetch)."""
        self._keys.setdefault(key, _Key()).waiters.append(callback)

    def started(self, key: str, next_allowed: float) -> None:
        state = self._keys.setdefault(key, _Key())
        state.in_flight += 1
        state.next_allowed = max(state.next_allowed, next_allowed)
        self._starts += 1
        if self._starts % FORGET_EVERY == 0:
            self._forget()

    def hold(self, key: str, not_before: float, crawl_delay: float | None = None) -> None:
        """No start to ``key`` before ``not_before`` (a delay learned or a back-off), in any fetch."""
        state = self._keys.setdefault(key, _Key())
        state.next_allowed = max(state.next_allowed, not_before)
        if crawl_delay is not None:
            state.crawl_delay = crawl_delay

    def ended(self, key: str, next_allowed: float) -> None:
        state = self._keys.setdefault(key, _Key())
        state.in_flight = max(0, state.in_flight - 1)
        state.next_allowed = max(state.next_allowed, next_allowed)
        waiters, state.waiters = state.waiters, []
        for callback in waiters:
            callback()

    def _forget(self) -> None:
        now = self.clock()
        for key in [k for k, s in self._keys.items() if not s.in_flight and not s.waiters and s.next_allowed <= now]:
            del self._keys[key]
