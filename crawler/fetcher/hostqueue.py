"""Per-host queues and the ready-time heap that hands workers only entries whose host is ready.

A worker never waits on one host's delay while another host is ready: the
dispatcher pops the host with the earliest ready time, and only when a worker is
idle. No polling and no per-entry sleeps: waits are on an event with a timeout
to the next ready time. When and how often a queue may start a request is not
decided here but by its ``QueueState`` in ``Politeness`` (crawler/fetcher/politeness.py),
shared with every other fetch of the process; a worker calls ``start`` just
before its request goes out, or releases the entry without one.

A queue is forgotten once it is empty and its delay has passed, so memory
follows the number of busy hosts, not of all hosts. A blocked queue (too many
failures, a Retry-After over the cap) or origin (robots.txt unavailable, a
Crawl-delay over the cap) is remembered only by key and reason, and every entry
for it is dropped through ``on_drop`` so the caller records it.

The entries a fetch makes itself (its redirect hops and the outlinks it follows,
``made_here``: redirects.made_by_fetch) wait beside the fetchlist's but are counted apart: the reader of
the fetchlist waits only while ``max_queued`` of its own entries wait, so hosts
further down the fetchlist are not held back behind one large site's followed
links, and followed links have a budget of their own (``follow_room``).

``FetchQueues`` is the one owner of a fetch's per-host state: its host queues,
their politeness (through ``Politeness``), failures in a row, and what is
blocked. The fetcher tells it what happened (a start, an answer, a failure,
a Retry-After, robots.txt's verdict) and never sets a queue's fields itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from crawler.config import FetcherConfig
from crawler.fetcher.politeness import Politeness, QueueState
from crawler.fetcher.robots import origin_of


@dataclass(slots=True)
class HostQueue:
    """One politeness key's entries in this fetch; its fields are set by ``FetchQueues`` alone."""

    key: str
    state: QueueState
    entries: deque[Any] = field(default_factory=deque)
    in_flight: int = 0  # this fetch's entries out (state.busy counts every fetch's)
    scheduled: bool = False  # has an item in the heap
    failures: int = 0  # connection, timeout and DNS failures, 429s and 503s, in a row

    @property
    def delay(self) -> float:
        return self.state.delay

    @property
    def next_allowed(self) -> float:
        return self.state.next_allowed


MAX_BLOCKED = 100_000  # blocked queue keys (and origins) remembered at once


def _no_drop(entry: Any, reason: str) -> None:
    raise RuntimeError(f"entry dropped ({reason}) with no on_drop handler")


def _remember(blocked: OrderedDict[str, str], key: str, reason: str) -> None:
    blocked[key] = reason
    while len(blocked) > MAX_BLOCKED:
        blocked.popitem(last=False)


def _entry_origin(entry: Any) -> str:
    return origin_of(entry["url"])


def _from_fetchlist(entry: Any) -> bool:
    return False


class _Dispatcher:
    """The ready-time heap and the hand-out to idle workers (``FetchQueues`` fills the queues it reads)."""

    def __init__(self, cfg: FetcherConfig, workers: int, clock: Callable[[], float],
                 politeness: Politeness | None, made_here: Callable[[Any], bool]) -> None:
        self.cfg = cfg
        self.per_host = cfg.per_host_concurrency  # read several times per entry: an attribute, not a property
        # Always one: a fetch on its own gets a private one, the daemon's fetches share theirs.
        self.politeness = politeness if politeness is not None else Politeness(cfg, clock=clock)
        self.clock = clock
        self.hosts: dict[str, HostQueue] = {}
        self.queued = 0
        self.made = 0  # of ``queued``, the entries the fetch made itself (``made_here``)
        self.made_here = made_here
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

    def finish_feeding(self) -> None:
        self._feeding = False
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

    def release(self, hq: HostQueue, started: bool = True) -> None:
        """A worker finished an entry of ``hq`` (``started``: its request went out); it is idle again."""
        self.release_queue(hq, started)
        self.release_worker()

    def release_worker(self) -> None:
        """The worker that had an entry is idle again (its queue was released before, or is now)."""
        self.in_flight -= 1
        self.politeness.slots.release()
        self._idle.release()
        self._changed.set()

    def release_queue(self, hq: HostQueue, started: bool = True) -> None:
        """The entry's request is over (``started``: it went out): the queue may start its next one while
        the worker still parses and records this one. Its work still counts until ``release_worker``."""
        hq.in_flight -= 1
        self.politeness.ended(hq.state, started)
        if hq.entries:
            self._schedule(hq, hq.next_allowed)
        elif hq.in_flight == 0:
            if hq.next_allowed <= self.clock() and not hq.scheduled:
                self._forget(hq)
            else:
                # Remember the host until its delay has passed, then forget it (bounded memory).
                self._schedule(hq, hq.next_allowed)
        self._changed.set()

    def _forget(self, hq: HostQueue) -> None:
        if self.hosts.get(hq.key) is hq:
            del self.hosts[hq.key]
            self.politeness.detach(hq.state)

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
            await self.politeness.slots.acquire()  # the process-wide cap; ``release`` gives it back
            self.ready.put_nowait(item)
        for _ in range(self._workers):
            self.ready.put_nowait(None)

    async def _next_ready(self) -> tuple[HostQueue, Any] | None:
        politeness = self.politeness
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
                        self._forget(hq)
                    elif hq.in_flight == 0:
                        self._schedule(hq, hq.next_allowed)
                    continue
                if hq.in_flight >= self.per_host:
                    continue  # ``release`` schedules it again
                wait = politeness.ready_at(hq.state, self.per_host, now)
                if wait is not None:
                    if wait == math.inf:
                        politeness.on_change(hq.state, lambda hq=hq: self._wake(hq))
                    else:
                        self._schedule(hq, wait)
                    continue
                entry = hq.entries.popleft()
                self.queued -= 1
                self.made -= self.made_here(entry)
                self._space.set()
                hq.in_flight += 1
                self.in_flight += 1
                politeness.dispatched(hq.state)
                # No reschedule here: the next entry waits for this one's start (``_wake``).
                if hq.entries and hq.in_flight < self.per_host:
                    politeness.on_change(hq.state, lambda hq=hq: self._wake(hq))
                return hq, entry
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    def _wake(self, hq: HostQueue) -> None:
        if self.hosts.get(hq.key) is hq and hq.entries and hq.in_flight < self.per_host:
            self._schedule(hq, hq.next_allowed)


class FetchQueues(_Dispatcher):
    """Bounded host queues (``put`` waits while ``max_queued`` fetchlist entries wait; ``max_made`` bounds the
    entries the fetch made itself, through ``follow_room``), their politeness and failures."""

    def __init__(
        self,
        cfg: FetcherConfig,
        workers: int,
        max_queued: int = 10_000,
        max_made: int | None = None,  # None: cfg.follow_max_queued
        made_here: Callable[[Any], bool] = _from_fetchlist,
        clock: Callable[[], float] = time.monotonic,
        on_drop: Callable[[Any, str], None] = _no_drop,
        politeness: Politeness | None = None,
        origin: Callable[[Any], str] = _entry_origin,
        log: Any = None,
    ) -> None:
        super().__init__(cfg, workers, clock, politeness, made_here)
        self.max_queued = max_queued
        self.max_made = cfg.follow_max_queued if max_made is None else max_made
        self.on_drop = on_drop
        self.origin = origin
        self.log = log if log is not None else structlog.get_logger()
        # key -> reason: every entry for it is dropped. Bounded: a fetchlist of a million dead hosts
        # blocks a million keys; a forgotten one's next entry is simply tried (and blocked) again.
        self.blocked: OrderedDict[str, str] = OrderedDict()
        self.blocked_origins: OrderedDict[str, str] = OrderedDict()

    async def put(self, key: str, entry: Any) -> None:
        """Queue an entry from the fetchlist; waits while ``max_queued`` fetchlist entries wait."""
        while self.queued - self.made >= self.max_queued:
            self._space.clear()
            await self._space.wait()
        self.push(key, entry)

    def push(self, key: str, entry: Any) -> None:
        """Queue an entry without waiting (a redirect hop: at most one per busy worker)."""
        if key in self.blocked:
            self.on_drop(entry, self.blocked[key])
            return
        if self.blocked_origins and (origin := self.origin(entry)) in self.blocked_origins:
            self.on_drop(entry, self.blocked_origins[origin])
            return
        hq = self.hosts.get(key)
        if hq is None:
            state = self.politeness.attach(key)
            if state.hold_until - self.clock() > self.cfg.max_crawl_delay:
                # A Retry-After from an earlier fetch or round that outlasts what this one would wait.
                self.politeness.detach(state)
                _remember(self.blocked, key, "retry_after_over_cap")
                self.on_drop(entry, "retry_after_over_cap")
                return
            hq = self.hosts[key] = HostQueue(key, state)
        hq.entries.append(entry)
        self.queued += 1
        self.made += self.made_here(entry)
        if hq.in_flight < self.per_host:
            self._schedule(hq, hq.next_allowed)

    def requeue(self, hq: HostQueue, entry: Any) -> None:
        """Put a dispatched entry back at the head of its queue (its start must wait longer than thought).

        The worker still holds the entry; ``release`` then schedules the queue as usual.
        """
        if hq.key in self.blocked:
            self.on_drop(entry, self.blocked[hq.key])
            return
        hq.entries.appendleft(entry)
        self.queued += 1
        self.made += self.made_here(entry)

    def follow_room(self) -> int:
        """How many more entries the fetch may make now (followed outlinks; its redirect hops are always taken)."""
        return max(0, self.max_made - self.made)

    def may_start(self, hq: HostQueue) -> bool:
        return self.politeness.may_start(hq.state, self.clock())

    def start(self, hq: HostQueue) -> None:
        """The dispatched entry's request starts now."""
        self.politeness.started(hq.state)

    def restamp(self, hq: HostQueue) -> None:
        """The started request's start counts from now: its connection is ready only now (a new one), or its
        answer (or failure) is in, which shows the server has read it however late it did."""
        self.politeness.note_start(hq.state, self.clock())

    def note_start(self, hq: HostQueue, at: float) -> None:
        self.politeness.note_start(hq.state, at)

    def set_crawl_delay(self, hq: HostQueue, delay: float | None, origin: str | None = None) -> None:
        """``origin`` (default: the key itself) is served through this queue, with this robots Crawl-delay."""
        self.politeness.set_origin_delay(hq.state, origin if origin is not None else hq.key, delay)

    def adapt(self, hq: HostQueue, elapsed: float) -> None:
        self.politeness.adapt(hq.state, elapsed)

    def answered(self, hq: HostQueue, elapsed: float) -> None:
        """``hq``'s request was answered in ``elapsed`` seconds, and not with a 429 or 503: no failure in a row."""
        self.politeness.adapt(hq.state, elapsed)
        hq.failures = 0

    def back_off(self, hq: HostQueue, seconds: float) -> None:
        """No request to this queue for ``seconds`` (Retry-After, repeated failures)."""
        self.politeness.hold(hq.state, seconds)

    def failed(self, hq: HostQueue, kind: str) -> None:
        """Repeated failures back a host off, and past the cap drop the rest of its queue."""
        hq.failures += 1
        cap = self.cfg.max_exceptions_per_queue
        if cap and hq.failures >= cap:
            self.log.warning("fetch.queue_dropped", host=hq.key, failures=hq.failures, last=kind)
            self.block(hq, f"max_exceptions_per_queue ({cap}), last: {kind}")
            return
        self.back_off(hq, min(self.cfg.max_delay, max(hq.delay, 0.5) * 2 ** (hq.failures - 1)))

    def slow_down(self, hq: HostQueue, kind: str, wait: float | None) -> None:
        """A 429 or 503 (``kind``): wait what its Retry-After asks (``wait``), else back off as for a failure."""
        if wait is None:
            self.failed(hq, kind)
        else:
            self.retry_after(hq, wait)

    def retry_after(self, hq: HostQueue, wait: float) -> None:
        """Hold the queue ``wait`` seconds (kept across fetches and restarts); past the cap, drop the rest."""
        self.back_off(hq, wait)
        if wait > self.cfg.max_crawl_delay:
            self.log.warning("fetch.retry_after_over_cap", host=hq.key, retry_after=wait)
            self.block(hq, "retry_after_over_cap")
        else:
            self.log.info("fetch.retry_after", host=hq.key, retry_after=wait)

    def block(self, hq: HostQueue, reason: str) -> None:
        """Drop every waiting and future entry of this queue through ``on_drop``."""
        _remember(self.blocked, hq.key, reason)
        for entry in self.drop_host(hq):
            self.on_drop(entry, reason)

    def block_origin(self, hq: HostQueue, origin: str, reason: str) -> None:
        """Drop every waiting and future entry of ``origin`` (one origin of ``hq``'s queue), not the others."""
        _remember(self.blocked_origins, origin, reason)
        kept: deque[Any] = deque()
        for entry in hq.entries:
            if self.origin(entry) == origin:
                self.queued -= 1
                self.made -= self.made_here(entry)
                self.on_drop(entry, reason)
            else:
                kept.append(entry)
        hq.entries = kept
        self._space.set()
        self._changed.set()

    def drop_host(self, hq: HostQueue) -> list[Any]:
        """Remove and return every waiting entry of a host (to be recorded by the caller)."""
        dropped = list(hq.entries)
        hq.entries.clear()
        self.queued -= len(dropped)
        self.made -= sum(1 for entry in dropped if self.made_here(entry))
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
        self.max_made = cfg.follow_max_queued
        if self.politeness.cfg is not cfg:
            self.politeness.reconfigure(cfg)
        for hq in self.hosts.values():
            if hq.entries and hq.in_flight < self.per_host:
                self._schedule(hq, hq.next_allowed)
        self._changed.set()

    def close(self) -> None:
        """Let go of every queue's politeness state (the fetch is over; the state stays with ``politeness``)."""
        for hq in self.hosts.values():
            self.politeness.detach(hq.state)
        self.hosts.clear()

    def waiting_hosts(self) -> int:
        """Queues with entries that wait for their politeness delay (not stuck: just polite)."""
        now = self.clock()
        return sum(1 for hq in self.hosts.values() if hq.entries and hq.next_allowed > now)

    def figures(self) -> tuple[int, int, int, int]:
        """(requests in flight, entries queued, active hosts, waiting hosts), for ``fetch.progress``."""
        return self.in_flight, self.queued, len(self.hosts), self.waiting_hosts()

    def keeping(self) -> contextlib.AbstractAsyncContextManager[None]:
        """For the fetch's run: the politeness state is saved while it runs and when it ends."""
        return self.politeness.keeping()
