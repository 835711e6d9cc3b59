"""When the daemon looks again, and whether generate may find something it did not find last time.

A generate that found nothing (or found a segment) gives the same answer until
one of these happens; each is a reason, listed in the ``daemon.wake`` event of
the next generate:

- ``seeds``: a seed file appeared or changed in ``daemon.seeds`` (watched: watch.py);
- ``merged``: updatedb merged a segment (new URLs, new refetch times, fewer URLs handed out);
- ``due``: the earliest ``next_fetch`` that was still ahead at the last generate has passed;
- ``host_freed``: a host with due URLs, left out because a running fetch held it, is free again;
- ``more_due``: generate made a segment and left due URLs of hosts nobody holds (``generate.top_n``);
- ``fetch_ended``: a fetch ended: its hosts and the redirect targets it held are free;
- ``reload``: SIGHUP reloaded the config (``generate.*`` may have changed);
- ``webdb``: the webdb changed under the daemon (another command wrote it), seen once per idle_sleep;
- ``start``, ``retry``: the daemon started; a step failed and is tried again.

Anything else that wakes the daemon is counted as skipped, by what it was: a
host freed that has nothing due (``host_freed``), ``daemon.idle_sleep`` passing
with nothing changed (``idle_sleep``), a seeds-folder event with no new content
(``seeds``). The loop (loop.py) decides when generate may run; this module only
keeps the reasons, the two deadlines and the wait.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime


def utc_now() -> datetime:
    """Now, naive UTC: how the webdb stores ``next_fetch``."""
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Outlook:
    """What the webdb said right after a generate: when its answer can change by itself."""

    version: int | None  # the webdb version generate read (None: no webdb yet)
    next_due: datetime | None  # the earliest next_fetch after generate's now (naive UTC); None: none
    waiting: frozenset[str] | None  # left-out hosts that have due URLs; None: not known, any freed host may
    more: bool = False  # due URLs of hosts nobody holds are left (generate.top_n): generate again when it may


UNKNOWN = Outlook(None, None, None)


class Wake:
    def __init__(self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], datetime] = utc_now,
                 on_skip: Callable[[str], None] | None = None) -> None:
        self.clock = clock
        self.wall = wall
        self.on_skip = on_skip  # e.g. a metric
        self.reasons: set[str] = {"start"}  # what changed since the last generate
        self.skipped: Counter[str] = Counter()  # looks that ran no generate since the last one, by cause
        self.outlook = UNKNOWN
        self.free_at: float | None = None  # (clock) when the next waiting host leaves the busy set
        self.event = asyncio.Event()  # something happened: the loop should look

    def note(self, reason: str) -> None:
        """A change the loop itself made (it is looking already: no wake-up needed)."""
        self.reasons.add(reason)

    def changed(self, reason: str) -> None:
        self.reasons.add(reason)
        self.event.set()

    def skip(self, cause: str) -> None:
        self.skipped[cause] += 1
        if self.on_skip is not None:
            self.on_skip(cause)

    def host_freed(self, host: str, free_at: float, held_elsewhere: bool) -> None:
        """A running fetch has no work left for ``host``; it leaves the busy set at ``free_at`` (clock)."""
        if self.reasons:
            # Generate is pending but was held back (the fetches kept every worker busy): look whether it may run.
            self.event.set()
            return
        waiting = self.outlook.waiting
        if held_elsewhere or (waiting is not None and host not in waiting):
            self.skip("host_freed")
            return
        if free_at <= self.clock():
            self.changed("host_freed")
        else:  # still within its delay after the last request
            self.free_at = free_at if self.free_at is None else min(self.free_at, free_at)
            self.event.set()  # the wait takes up the earlier deadline

    def take(self) -> tuple[set[str], Counter[str]]:
        """The reasons and skips since the last generate, which is about to run; both start afresh."""
        reasons, skipped = self.reasons, self.skipped
        self.reasons, self.skipped = set(), Counter()
        return reasons, skipped

    def generated(self, outlook: Outlook) -> None:
        self.outlook = outlook
        self.free_at = None
        if outlook.more:
            self.note("more_due")

    def looking(self) -> None:
        """The loop looks now: whatever happens from here wakes the next wait."""
        self.event.clear()

    def until_deadline(self) -> float | None:
        """Seconds until the next URL is due or a waiting host is free (0 when passed); None: no deadline."""
        waits = []
        if self.outlook.next_due is not None:
            waits.append((self.outlook.next_due - self.wall()).total_seconds())
        if self.free_at is not None:
            waits.append(self.free_at - self.clock())
        return max(0.0, min(waits)) if waits else None

    def fire_deadlines(self) -> bool:
        """Turn the deadlines that passed into reasons; True if one did."""
        fired = False
        if self.outlook.next_due is not None and self.wall() >= self.outlook.next_due:
            self.outlook = dataclasses.replace(self.outlook, next_due=None)
            self.note("due")
            fired = True
        if self.free_at is not None and self.clock() >= self.free_at:
            self.free_at = None
            self.note("host_freed")
            fired = True
        return fired

    async def wait(self, stop: asyncio.Event, longest: float) -> bool:
        """Until something happens, a deadline passes or ``stop`` is set (True), or ``longest`` passes (False)."""
        end = self.clock() + longest
        while not (self.event.is_set() or stop.is_set() or self.fire_deadlines()):
            left = end - self.clock()
            if left <= 0:
                return False
            deadline = self.until_deadline()
            timeout = left if deadline is None else min(left, deadline)
            waits = [asyncio.ensure_future(self.event.wait()), asyncio.ensure_future(stop.wait())]
            try:
                await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
        return True
