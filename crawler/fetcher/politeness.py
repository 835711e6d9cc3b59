"""The one owner of per-queue politeness state: request starts, delays, holds and in-flight counts.

Every fetch has one (a standalone fetch a private one; the daemon's concurrent
fetches share one), and its host queues only ask it. The rules, checkable from
any server's access log:

- at most ``per_host_concurrency`` requests in flight to one queue key, and at
  most ``fetcher.concurrency`` in the whole process (``slots``);
- between two request starts to one key at least the key's delay, whatever the
  path (a fetch's first requests, robots.txt, redirect hops, several fetches):
  a dispatched entry is *pending* until its request starts or it ends without
  one, and no other entry of the key is dispatched while one is pending, so
  the delay the next start waits is always the one known after the last start
  (a Crawl-delay that robots.txt just gave included) and a URL that made no
  request (robots-denied, dropped) costs no delay;
- the delay is the largest of the key's origins' delays (each its robots.txt
  Crawl-delay, else ``fetcher.min_delay``), or the adaptive one if larger;
- a Retry-After or back-off holds the key until it expires.

Delays count from request starts, not ends, so a queue reaches its politeness
bound. The state outlives the process through ``PolitenessFile``
(crawler/fetcher/politeness_file.py): the last start and any hold of each
recently used key, so the next round, ``crawler fetch`` or a restart keeps them.

Memory follows the busy keys: a key is forgotten once no queue holds it,
nothing is in flight and its time has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.config import FetcherConfig
from crawler.fetcher.politeness_file import PolitenessFile, QueueRecord

FORGET_EVERY = 1024  # request starts between two sweeps of forgotten keys
SAVE_EVERY = 1.0  # seconds between two writes of the state file while fetching
MAX_HOLD = 86_400.0  # a Retry-After is kept for at most a day


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
class QueueState:
    key: str
    delay: float  # max(base, adaptive): what the next start waits after the last one
    base: float  # the largest delay of the origins seen (Crawl-delay, else min_delay)
    last_start: float = -math.inf
    hold_until: float = -math.inf
    busy: int = 0  # dispatched and not ended, in every fetch of the process
    pending: int = 0  # dispatched, neither started nor ended
    adaptive: float = 0.0
    refs: int = 0  # host queues holding this state
    origins: dict[str, float | None] = field(default_factory=dict)  # origin -> its Crawl-delay (None: none)
    waiters: list[Callable[[], None]] = field(default_factory=list)

    @property
    def next_allowed(self) -> float:
        return max(self.last_start + self.delay, self.hold_until)


class Politeness:
    def __init__(self, cfg: FetcherConfig, clock: Callable[[], float] = time.monotonic,
                 state_file: Path | None = None, log: Any = None) -> None:
        self.cfg = cfg
        self.slots = RequestSlots(cfg.concurrency)
        self.clock = clock
        self.log = log
        self._keys: dict[str, QueueState] = {}
        self._starts = 0
        self._floor = -math.inf  # after an unclean end: no start before the last save could have missed
        self._file = PolitenessFile(state_file) if state_file is not None else None
        self._keeping = 0
        self._keeper: asyncio.Task[None] | None = None
        if self._file is not None:
            self._restore()

    # -- state -----------------------------------------------------------------------------------------

    def attach(self, key: str) -> QueueState:
        """The state of ``key``, held by a host queue until ``detach``."""
        state = self._state(key)
        state.refs += 1
        return state

    def detach(self, state: QueueState) -> None:
        state.refs -= 1

    def _state(self, key: str) -> QueueState:
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = QueueState(key, self.cfg.min_delay, self.cfg.min_delay)
        return state

    def _allowed_at(self, state: QueueState) -> float:
        """The earliest next start of ``state``'s key (after an unclean end, not before the floor either)."""
        return max(state.next_allowed, self._floor + state.delay)

    def ready_at(self, state: QueueState, per_host: int, now: float) -> float | None:
        """None if an entry of ``state`` may be dispatched now, else when to look again (inf: on a change)."""
        if state.pending or state.busy >= (1 if state.delay > 0 else per_host):
            return math.inf
        at = self._allowed_at(state)
        return at if at > now else None

    def may_start(self, state: QueueState, now: float) -> bool:
        """Whether a dispatched entry's request may start now (its delay may have grown since dispatch).

        A queue with a delay starts no request while another of its requests is out (here and in ``ready_at``):
        the server may not have read that one yet. A loaded server reads a request late and the next at once,
        so the fetcher restamps each start when its answer is in, the only moment that bounds the read
        (counted from the sends, two requests reached nginx 0.998 s apart with a 1 s delay).
        """
        alone = state.delay <= 0 or state.busy - state.pending <= 0  # none of its other requests out
        return alone and self._allowed_at(state) <= now

    def on_change(self, state: QueueState, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, the next time a request of ``state`` starts or ends (in any fetch)."""
        state.waiters.append(callback)

    def dispatched(self, state: QueueState) -> None:
        state.busy += 1
        state.pending += 1

    def started(self, state: QueueState) -> None:
        """A dispatched entry's request starts now."""
        state.last_start = self.clock()
        state.pending -= 1
        self._starts += 1
        self._wake(state)
        if self._starts % FORGET_EVERY == 0:
            self._forget()

    def note_start(self, state: QueueState, at: float) -> None:
        """A request of ``state`` started at ``at`` on the entry's behalf (its origin's robots.txt)."""
        if at > state.last_start:
            state.last_start = at

    def ended(self, state: QueueState, started: bool) -> None:
        state.busy = max(0, state.busy - 1)
        if not started:
            state.pending = max(0, state.pending - 1)
        self._wake(state)

    def set_origin_delay(self, state: QueueState, origin: str, crawl_delay: float | None) -> None:
        """``origin`` belongs to ``state``'s queue, with this robots.txt Crawl-delay (None: none)."""
        if origin in state.origins and state.origins[origin] == crawl_delay:
            return
        state.origins[origin] = crawl_delay
        self._set_base(state)

    def adapt(self, state: QueueState, elapsed: float) -> None:
        """Adaptive delay: a slow host gets more time between request starts (``delay_factor``)."""
        if self.cfg.delay_factor <= 0:
            return
        state.adaptive = min(self.cfg.delay_factor * elapsed, max(self.cfg.max_delay, state.base))
        state.delay = max(state.base, state.adaptive)

    def hold(self, state: QueueState, seconds: float) -> None:
        """No start to ``state``'s key for ``seconds`` (Retry-After, back-off), in any fetch, kept across runs."""
        until = self.clock() + min(seconds, MAX_HOLD)
        if until > state.hold_until:
            state.hold_until = until

    def reconfigure(self, cfg: FetcherConfig) -> None:
        self.cfg = cfg
        self.slots.set_limit(cfg.concurrency)
        for state in self._keys.values():
            self._set_base(state)

    def _set_base(self, state: QueueState) -> None:
        minimum = self.cfg.min_delay
        state.base = max([minimum, *(minimum if d is None else d for d in state.origins.values())])
        state.delay = max(state.base, state.adaptive)

    def _wake(self, state: QueueState) -> None:
        if state.waiters:
            waiters, state.waiters = state.waiters, []
            for callback in waiters:
                callback()

    def _forget(self) -> None:
        now = self.clock()
        for key in [k for k, s in self._keys.items()
                    if not s.refs and not s.busy and not s.waiters and s.next_allowed <= now]:
            del self._keys[key]

    # -- persistence -----------------------------------------------------------------------------------

    def _offset(self) -> float:
        """Add to a time on ``clock`` to get wall-clock time. With a state file the clock is the boot's
        monotonic one (the default), which the file maps exactly between processes of one boot."""
        return time.time() - self.clock()

    def _restore(self) -> None:
        assert self._file is not None
        offset = self._offset()
        loaded = self._file.load(self.log, offset)
        if loaded is None:
            return
        if not loaded.clean:
            # Killed mid-fetch: starts after the last save are unknown, so every key waits as if it
            # had one just after it.
            self._floor = loaded.written_at + SAVE_EVERY - offset
        for key, record in loaded.queues.items():
            state = self._state(key)
            state.last_start = max(state.last_start, record.last_start - offset)
            state.hold_until = max(state.hold_until, record.hold_until - offset)
            state.origins.update(record.origins)
            self._set_base(state)

    def _snapshot(self, offset: float) -> dict[str, QueueRecord]:
        now = self.clock()
        return {key: QueueRecord(last_start=s.last_start + offset, hold_until=s.hold_until + offset,
                                 origins={o: d for o, d in s.origins.items() if d is not None})
                for key, s in self._keys.items() if s.next_allowed > now or s.busy}

    async def save(self, clean: bool) -> None:
        if self._file is None:
            return
        offset = self._offset()
        snapshot = self._snapshot(offset)
        await asyncio.to_thread(self._file.save, snapshot, clean, self.log, offset)

    @contextlib.asynccontextmanager
    async def keeping(self) -> AsyncIterator[None]:
        """While a fetch runs: the state file is written every SAVE_EVERY seconds, and cleanly at the end."""
        self._keeping += 1
        if self._keeping == 1 and self._file is not None:
            self._keeper = asyncio.ensure_future(self._keep())
        try:
            yield
        finally:
            self._keeping -= 1
            if self._keeping == 0 and self._keeper is not None:
                self._keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._keeper
                self._keeper = None
                await self.save(clean=True)

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(SAVE_EVERY)
            await self.save(clean=False)


# The daemon's name for it, from when only the daemon shared one.
SharedPoliteness = Politeness
