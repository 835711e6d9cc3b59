"""Per-host queues and the ready-time heap that hands workers only entries whose host is ready.

A worker never waits on one host's delay while another host is ready: the
dispatcher pops the host with the earliest ready time, and only when a worker is
idle, so the moment of dispatch is the moment the request starts. No polling and
no per-entry sleeps: waits are on an event with a timeout to the next ready time.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crawler.config import FetcherConfig


@dataclass(slots=True)
class HostQueue:
    key: str
    delay: float
    entries: deque[Any] = field(default_factory=deque)
    in_flight: int = 0
    next_allowed: float = 0.0
    scheduled: bool = False  # has an item in the heap
    robots_checked: bool = False


class FetchQueues:
    """Bounded host queues (``put`` waits when ``max_queued`` entries wait) and a dispatcher."""

    def __init__(
        self,
        cfg: FetcherConfig,
        workers: int,
        max_queued: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_host = cfg.per_host_concurrency
        self.min_delay = cfg.min_delay
        self.max_queued = max_queued
        self.clock = clock
        self.hosts: dict[str, HostQueue] = {}
        self.queued = 0
        self.in_flight = 0
        self._heap: list[tuple[float, int, str]] = []
        self._counter = 0
        self._changed = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._idle = asyncio.Semaphore(workers)
        self._workers = workers
        self.ready: asyncio.Queue[tuple[HostQueue, Any] | None] = asyncio.Queue()
        self._feeding = True

    def _schedule(self, hq: HostQueue, at: float) -> None:
        if hq.scheduled:
            return
        hq.scheduled = True
        self._counter += 1
        heapq.heappush(self._heap, (at, self._counter, hq.key))
        self._changed.set()

    async def put(self, key: str, entry: Any) -> None:
        while self.queued >= self.max_queued:
            self._space.clear()
            await self._space.wait()
        hq = self.hosts.get(key)
        if hq is None:
            hq = self.hosts[key] = HostQueue(key, self.min_delay)
        hq.entries.append(entry)
        self.queued += 1
        if hq.in_flight < self.per_host:
            self._schedule(hq, hq.next_allowed)

    def finish_feeding(self) -> None:
        self._feeding = False
        self._changed.set()

    def set_delay(self, hq: HostQueue, delay: float) -> None:
        """Apply a delay learned after dispatch (robots Crawl-delay) to the host's next start."""
        hq.delay = delay
        hq.next_allowed = max(hq.next_allowed, self.clock() + delay)

    def drop_host(self, hq: HostQueue) -> list[Any]:
        """Remove and return every waiting entry of a host (to be recorded by the caller)."""
        dropped = list(hq.entries)
        hq.entries.clear()
        self.queued -= len(dropped)
        self._space.set()
        return dropped

    def release(self, hq: HostQueue) -> None:
        """A worker finished an entry of ``hq``; it is idle again."""
        hq.in_flight -= 1
        self.in_flight -= 1
        if self.per_host == 1:
            # Space requests by the delay from the end of the last one, as Nutch does.
            hq.next_allowed = max(hq.next_allowed, self.clock() + hq.delay)
        if hq.entries:
            self._schedule(hq, hq.next_allowed)
        elif hq.in_flight == 0:
            if hq.next_allowed <= self.clock() and not hq.scheduled:
                del self.hosts[hq.key]
            else:
                # Remember the host until its delay has passed, then forget it (bounded memory).
                self._schedule(hq, hq.next_allowed)
        self._idle.release()
        self._changed.set()

    def _done(self) -> bool:
        return not self._feeding and self.queued == 0

    async def dispatch(self) -> None:
        """Run until every entry is handed out, then send one stop signal per worker."""
        while True:
            await self._idle.acquire()
            item = await self._next_ready()
            if item is None:
                self._idle.release()
                break
            self.ready.put_nowait(item)
        for _ in range(self._workers):
            self.ready.put_nowait(None)

    async def _next_ready(self) -> tuple[HostQueue, Any] | None:
        while True:
            if self._done():
                return None
            timeout = None
            while self._heap:
                at, _, key = self._heap[0]
                now = self.clock()
                if at > now:
                    timeout = at - now
                    break
                heapq.heappop(self._heap)
                hq = self.hosts.get(key)
                if hq is None:
                    continue
                hq.scheduled = False
                if not hq.entries:
                    if hq.in_flight == 0 and hq.next_allowed <= now:
                        # Idle and past its delay: nothing to remember, so keep memory bounded.
                        del self.hosts[key]
                    elif hq.in_flight == 0:
                        self._schedule(hq, hq.next_allowed)
                    continue
                if hq.in_flight >= self.per_host:
                    continue
                if hq.next_allowed > now:
                    self._schedule(hq, hq.next_allowed)
                    continue
                entry = hq.entries.popleft()
                self.queued -= 1
                self._space.set()
                hq.in_flight += 1
                self.in_flight += 1
                hq.next_allowed = now + hq.delay
                if hq.entries and hq.in_flight < self.per_host:
                    self._schedule(hq, hq.next_allowed)
                return hq, entry
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
