"""What ``/status`` answers: the daemon's phase, segment, cycle, rate and uptime."""

from __future__ import annotations

import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

from crawler.fetcher.events import FetchDone, FetchProgress

RATE_WINDOW = 10  # seconds the pages/s figure is averaged over


class RateWindow:
    """Events per second over the last ``window`` whole seconds (one counter per second, bounded memory)."""

    def __init__(self, window: int = RATE_WINDOW, clock: Any = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self._buckets: deque[list[int]] = deque()  # [second, count], oldest first

    def add(self, n: int = 1) -> None:
        second = int(self.clock())
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += n
        else:
            self._buckets.append([second, n])
        self._trim(second)

    def rate(self) -> float:
        now = int(self.clock())
        self._trim(now)
        # The current second is incomplete: average over the full seconds before it.
        counted = sum(c for s, c in self._buckets if s < now)
        return round(counted / self.window, 2)

    def _trim(self, now: int) -> None:
        while self._buckets and self._buckets[0][0] < now - self.window:
            self._buckets.popleft()


class DaemonStatus:
    """Mutable state of a running daemon; also a ``FetchObserver`` for the live figures."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC)
        self.phase = "starting"
        self.cycle = 0
        self.segment: str | None = None
        self.fetching: dict[str, FetchProgress | None] = {}
        self.fetched_total = 0
        self.last_cycle: dict[str, Any] | None = None
        self.rate = RateWindow()

    def fetch_done(self, event: FetchDone) -> None:
        self.fetched_total += 1
        self.rate.add()

    def progress(self, event: FetchProgress) -> None:
        self.fetching[event.segment] = event

    def fetch_started(self, segment: str) -> None:
        self.fetching[segment] = None

    def fetch_ended(self, segment: str) -> None:
        self.fetching.pop(segment, None)

    def snapshot(self) -> dict[str, Any]:
        progress = [p for p in self.fetching.values() if p is not None]
        return {
            "phase": self.phase,
            "cycle": self.cycle,
            "segment": self.segment,
            "segments_fetching": sorted(self.fetching),
            "pages_per_second": self.rate.rate(),
            "fetched_total": self.fetched_total,
            "in_flight": sum(p.in_flight for p in progress),
            "queued": sum(p.queued for p in progress),
            "uptime_seconds": round(time.monotonic() - self.started, 3),
            "started": self.started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "last_cycle": self.last_cycle,
        }
