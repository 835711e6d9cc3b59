"""Per-host queues and the ready-time heap that hands workers only entries whose host is ready.

A worker never waits on one host's delay while another host is ready: the
dispatcher pops the host with the earliest ready time, and only when a worker is
idle, so the moment of dispatch is the moment the request starts. No polling and
no per-entry sleeps: waits are on an event with a timeout to the next ready time.

A queue's delay is its robots Crawl-delay if it has one, else ``min_delay``;
with ``delay_factor`` it adapts to the host's response time (clamped to
``min_delay``..``max_delay``). A queue is forgotten once it is empty and its
delay has passed, so memory follows the number of busy hosts, not of all hosts.
A blocked queue (too many failures, a Crawl-delay or Retry-After over the cap)
is remembered only by key and reason, and every entry for it is dropped through
``on_drop`` so the caller records it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crawler.config import FetcherConfig
from crawler.fetcher.politeness import SharedPoliteness


@dataclass(slots=True)
class HostQueue:
    key: str
    delay: float
    entries: deque[Any] = field(default_factory=deque)
    in_flight: int = 0
    next_allowed: float = 0.0
    scheduled: bool = False  # has an item in the heap
    robots_checked: bool = False
    crawl_delay: float | None = None
    failures: int = 0  # connection, timeout and DNS failures, 429s and 503s, in a row


MAX_BLOCKED = 100_000  # blocked queue keys remembered at once


def _no_drop(entry: Any, reason: str) -> None:
    raise RuntimeError(f"entry dropped ({reason}) with no on_drop handler")


class FetchQueues:
    """Bounded host queues (``put`` waits when ``max_queued`` entries wait) and a dispatcher."""

    def __init__(
        self,
        cfg: FetcherConfig,
        workers: int,
        max_queued: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        on_drop: Callable[[Any, str], None] = _no_drop,
        shared: SharedPoliteness | None = None,
    ) -> None:
        self.cfg = cfg
        self.per_host = cfg.per_host_concurrency  # read several times per entry: an attribute, not a property
        # Limits kept across every fetch of the process (the daemon's concurrent segments); None = this one only.
        self.shared = shared
        self.max_queued = max_queued
        self.clock = clock
        self.on_drop = on_drop
        self.hosts: dict[str, HostQueue] = {}
        # key -> reason: every entry for it is dropped. Bounded: a fetchlist of a million dead hosts
        # blocks a million keys; a forgotten one's next entry is simply tried (and blocked) again.
        self.blocked: OrderedDict[str, str] = OrderedDict()
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
        """Queue an entry from the fetchlist; waits while ``max_queued`` entries wait."""
        while self.queued >= self.max_queued:
            self._space.clear()
            await self._space.wait()
        self.push(key, entry)

    def push(self, key: str, entry: Any) -> None:
        """Queue an entry without waiting (a redirect hop: at most one per busy worker)."""
        if key in self.blocked:
            self.on_drop(entry, self.blocked[key])
            return
        hq = self.hosts.get(key)
        if hq is None:
            hq = self.hosts[key] = HostQueue(key, self.cfg.min_delay)
        hq.entries.append(entry)
        self.queued += 1
        if hq.in_flight < self.per_host:
            self._schedule(hq, hq.next_allowed)

    def requeue(self, hq: HostQueue, entry: Any, not_before: float) -> None:
        """Put a dispatched entry back at the head of its queue, to start no earlier than ``not_before``.

        The worker still holds the entry's slot; ``release`` then schedules the queue as usual.
        """
        if hq.key in self.blocked:
            self.on_drop(entry, self.blocked[hq.key])
            return
        hq.entries.appendleft(entry)
        self.queued += 1
        hq.next_allowed = max(hq.next_allowed, not_before)

    def finish_feeding(self) -> None:
        self._feeding = False
        self._changed.set()

    def set_crawl_delay(self, hq: HostQueue, delay: float) -> None:
        """Apply a robots Crawl-delay learned after dispatch to the host's next start."""
        hq.crawl_delay = delay
        hq.delay = delay
        hq.next_allowed = max(hq.next_allowed, self.clock() + delay)
        if self.shared is not None:
            self.shared.hold(hq.key, hq.next_allowed, crawl_delay=delay)

    def adapt(self, hq: HostQueue, elapsed: float) -> None:
        """Adaptive delay: a slow host gets more time between requests (``delay_factor``)."""
        if self.cfg.delay_factor <= 0:
            return
        floor = hq.crawl_delay if hq.crawl_delay is not None else self.cfg.min_delay
        ceiling = max(self.cfg.max_delay, floor)
        hq.delay = min(max(floor, self.cfg.delay_factor * elapsed), ceiling)

    def back_off(self, hq: HostQueue, seconds: float) -> None:
        """No request to this queue for ``seconds`` (Retry-After, repeated failures)."""
        hq.next_allowed = max(hq.next_allowed, self.clock() + seconds)
        if self.shared is not None:
            self.shared.hold(hq.key, hq.next_allowed)

    def block(self, hq: HostQueue, reason: str) -> None:
        """Drop every waiting and future entry of this queue through ``on_drop``."""
        self.blocked[hq.key] = reason
        while len(self.blocked) > MAX_BLOCKED:
            self.blocked.popitem(last=False)
        for entry in self.drop_host(hq):
            self.on_drop(entry, reason)

    def drop_host(self, hq: HostQueue) -> list[Any]:
        """Remove and return every waiting entry of a host (to be recorded by the caller)."""
        dropped = list(hq.entries)
        hq.entries.clear()
        self.queued -= len(dropped)
        self._space.set()
        self._changed.set()
        return dropped

    def drop_all(self) -> list[Any]:
        dropped: list[Any] = []
        for hq in list(self.hosts.values()):
            dropped.extend(self.drop_host(hq))
        return dropped

    def reconfigure(self, cfg: FetcherConfig) -> None:
        """New per-host limits and delays, live; queues with a Crawl-delay keep it."""
        self.cfg = cfg
        self.per_host = cfg.per_host_concurrency
        for hq in self.hosts.values():
            if hq.crawl_delay is None:
                hq.delay = cfg.min_delay
            if hq.entries and hq.in_flight < self.per_host:
                self._schedule(hq, hq.next_allowed)
        self._changed.set()

    def add_workers(self, count: int) -> None:
        self._workers += count
        for _ in range(count):
            self._idle.release()

    async def remove_workers(self, count: int) -> None:
        """Take ``count`` workers out: their idle slots are held, and they get a stop signal."""
        self._workers -= count
        for _ in range(count):
            self.ready.put_nowait(None)
        for _ in range(count):
            await self._idle.acquire()

    def release(self, hq: HostQueue) -> None:
        """A worker finished an entry of ``hq``; it is idle again."""
        hq.in_flight -= 1
        self.in_flight -= 1
        if self.per_host == 1:
            # Space requests by the delay from the end of the last one, as Nutch does.
            hq.next_allowed = max(hq.next_allowed, self.clock() + hq.delay)
        if self.shared is not None:
            self.shared.ended(hq.key, hq.next_allowed)
            self.shared.slots.release()
        if hq.entries:
            self._schedule(hq, hq.next_allowed)
        elif hq.in_flight == 0:
            if hq.next_allowed <= self.clock() and not hq.scheduled:
                self.hosts.pop(hq.key, None)
            else:
                # Remember the host until its delay has passed, then forget it (bounded memory).
                self._schedule(hq, hq.next_allowed)
        self._idle.release()
        self._changed.set()

    def waiting_hosts(self) -> int:
        """Queues with entries that wait for their politeness delay (not stuck: just polite)."""
        now = self.clock()
        return sum(1 for hq in self.hosts.values() if hq.entries and hq.next_allowed > now)

    def _done(self) -> bool:
        # In-flight entries may still add a redirect hop, so they count as work left.
        return not self._feeding and self.queued == 0 and self.in_flight == 0

    async def dispatch(self) -> None:
        """Run until every entry is handed out and done, then send one stop signal per worker."""
        while True:
            await self._idle.acquire()
            item = await self._next_ready()
            if item is None:
                self._idle.release()
                break
            if self.shared is not None:
                await self.shared.slots.acquire()  # the process-wide cap; ``release`` gives it back
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
                if self.shared is not None and not self._shared_ready(hq, now):
                    continue
                entry = hq.entries.popleft()
                self.queued -= 1
                self._space.set()
                hq.in_flight += 1
                self.in_flight += 1
                hq.next_allowed = now + hq.delay
                if self.shared is not None:
                    self.shared.started(hq.key, hq.next_allowed)
                if hq.entries and hq.in_flight < self.per_host:
                    self._schedule(hq, hq.next_allowed)
                return hq, entry
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    def _shared_ready(self, hq: HostQueue, now: float) -> bool:
        """Whether another fetch of the process lets ``hq`` start now; if not, look again when it may."""
        assert self.shared is not None
        if hq.crawl_delay is None and (learned := self.shared.crawl_delay(hq.key)) is not None:
            hq.crawl_delay = hq.delay = learned  # another fetch read this host's robots.txt first
        at = self.shared.wait(hq.key, self.per_host, now)
        if at is None:
            return True
        if at == float("inf"):
            self.shared.on_release(hq.key, lambda: self._wake(hq))
        else:
            self._schedule(hq, at)
        return False

    def _wake(self, hq: HostQueue) -> None:
        if self.hosts.get(hq.key) is hq and hq.entries and hq.in_flight < self.per_host:
            self._schedule(hq, hq.next_allowed)
