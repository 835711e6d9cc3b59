"""Progress of a running fetch: the ``fetch.progress`` event (or a progress bar), and the watchdog.

Every ``fetcher.progress_interval`` the fetcher reports pages/s, bytes/s,
requests in flight, entries queued, active hosts and errors by kind, to the
observer and to the log. When stderr is a terminal and the log format is
``auto``, a rich progress bar takes the place of the event stream.

The watchdog tells the two kinds of quiet apart. A host whose entries wait for
their politeness delay is working as meant (``waiting_hosts``). A request that
has been in flight for longer than ``fetcher.watchdog_after`` (by default the
whole-request timeout twice over, plus 5 s) is stuck in I/O (or in a protocol
without timeouts): it is logged once as ``fetch.stuck`` with its URL and age.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crawler.fetcher.events import FetchObserver, FetchProgress


@dataclass(slots=True)
class Counters:
    """A fetch's one tally: read here while it runs, and made into its report when it ends."""

    fetched: int = 0  # entries recorded (a row written), fetched or not
    bytes: int = 0
    by_status: dict[str, int] = field(default_factory=dict)  # fetch status -> rows
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> entries recorded without a fetch
    skipped: int = 0  # entries already recorded: committed by a cut-off run, or reached by a redirect
    errors: dict[str, int] = field(default_factory=dict)  # kind -> count
    followed: int = 0  # outlinks queued in this fetch (fetcher.follow_depth), each then recorded as any entry
    follow_skipped: dict[str, int] = field(default_factory=dict)  # reason -> outlinks left for the next round
    in_flight: dict[int, tuple[str, float]] = field(default_factory=dict)  # worker id -> (url, started)


def use_progress_bar(log_format: str) -> bool:
    return log_format == "auto" and sys.stderr.isatty()


class ProgressReporter:
    def __init__(self, segment: str, counters: Counters, queue_state: Callable[[], tuple[int, int, int, int]],
                 *, interval: float, stuck_after: float, total: int, log: Any, observer: FetchObserver,
                 bar: bool) -> None:
        self.segment = segment
        self.counters = counters
        self.queue_state = queue_state  # () -> (in_flight, queued, active_hosts, waiting_hosts)
        self.interval = interval
        self.stuck_after = stuck_after
        self.total = total
        self.log = log
        self.observer = observer
        self.bar = bar
        self._stuck_logged: set[tuple[int, float]] = set()

    async def run(self) -> None:
        if self.bar:
            await self._run_bar()
        else:
            await self._run_events()

    def _event(self, span: float, last_count: int, last_bytes: int) -> FetchProgress:
        in_flight, queued, active, _waiting = self.queue_state()
        span = max(span, 1e-9)
        return FetchProgress(
            segment=self.segment,
            pages_per_second=round((self.counters.fetched - last_count) / span, 2),
            bytes_per_second=round((self.counters.bytes - last_bytes) / span),
            in_flight=in_flight, queued=queued, active_hosts=active, fetched=self.counters.fetched,
        )

    async def _run_events(self) -> None:
        last_count, last_bytes, last_time = 0, 0, time.monotonic()
        while True:
            await asyncio.sleep(self.interval)
            now = time.monotonic()
            event = self._event(now - last_time, last_count, last_bytes)
            self.observer.progress(event)
            stuck = self.watch(now)
            self.log.info("fetch.progress", pages_per_second=event.pages_per_second,
                          bytes_per_second=event.bytes_per_second, in_flight=event.in_flight,
                          queued=event.queued, active_hosts=event.active_hosts, fetched=event.fetched,
                          errors=dict(self.counters.errors), waiting_hosts=self.queue_state()[3], stuck=stuck)
            last_count, last_bytes, last_time = self.counters.fetched, self.counters.bytes, now

    async def _run_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("fetch {task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(self.segment, total=self.total or None, rate="")
            last_count, last_bytes, last_time = 0, 0, time.monotonic()
            while True:
                await asyncio.sleep(min(self.interval, 1.0))
                now = time.monotonic()
                event = self._event(now - last_time, last_count, last_bytes)
                errors = sum(self.counters.errors.values())
                rate = (f"{event.pages_per_second:.0f} p/s, {event.bytes_per_second / 1e6:.1f} MB/s, "
                        f"{event.in_flight} in flight, {event.active_hosts} hosts, {errors} errors")
                bar.update(task, completed=self.counters.fetched, rate=rate)
                self.watch(now)
                if now - last_time >= self.interval:
                    self.observer.progress(event)
                    last_count, last_bytes, last_time = self.counters.fetched, self.counters.bytes, now

    def watch(self, now: float) -> int:
        """Log requests stuck in flight (once each); return how many there are."""
        stuck = 0
        for worker, (url, started) in list(self.counters.in_flight.items()):
            age = now - started
            if age > self.stuck_after:
                stuck += 1
                if (worker, started) not in self._stuck_logged:
                    self._stuck_logged.add((worker, started))
                    self.log.warning("fetch.stuck", url=url, seconds=round(age, 1))
        return stuck
