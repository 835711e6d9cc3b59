"""No idle tail: know which hosts a running fetch still holds, and when its workers start to idle.

At the end of a round only a few slow hosts are left, each held to its
politeness delay, and most workers wait. The tracker counts each host's
fetchlist entries down as results arrive (``FetchDone``), so it knows the hosts
that still have work without looking inside the fetcher. Once those hosts can no
longer keep every worker busy (hosts x per-host limit < concurrency), ``tail``
is set: the daemon then generates the next segment *without* those hosts (and
without hosts whose last request ended less than ``fetcher.min_delay`` ago), so
the two fetches running side by side never share a host and politeness holds.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from crawler.config import FetcherConfig
from crawler.fetcher.events import FetchDone, FetchProgress


def fetchlist_hosts(parts: list[Path]) -> Counter[str]:
    """Entries per host in the given fetchlist parts."""
    counts: Counter[str] = Counter()
    for part in parts:
        for batch in pq.ParquetFile(part).iter_batches(columns=["host"], batch_size=65_536):
            counts.update(batch.column(0).to_pylist())
    return counts


class HostTracker:
    """A ``FetchObserver`` that counts a running segment's entries down, host by host."""

    def __init__(self, remaining: Counter[str], cfg: FetcherConfig, clock=time.monotonic) -> None:
        self.remaining = dict(remaining)
        self.cfg = cfg
        self.clock = clock
        self.finished_at: dict[str, float] = {}
        self.tail = asyncio.Event()
        self._check()

    def fetch_done(self, event: FetchDone) -> None:
        left = self.remaining.get(event.host)
        if left is None:
            return
        if left <= 1:
            del self.remaining[event.host]
            self.finished_at[event.host] = self.clock()
            self._check()
        else:
            self.remaining[event.host] = left - 1

    def progress(self, event: FetchProgress) -> None:
        pass

    def reconfigure(self, cfg: FetcherConfig) -> None:
        self.cfg = cfg
        self._check()

    def _check(self) -> None:
        if len(self.remaining) * self.cfg.per_host_concurrency < self.cfg.concurrency:
            self.tail.set()

    def busy_hosts(self) -> set[str]:
        """Hosts a second fetch must not touch now: work left, or a request ended within the delay."""
        recent = self.clock() - self.cfg.min_delay
        for host in [h for h, at in self.finished_at.items() if at < recent]:
            del self.finished_at[host]
        return set(self.remaining) | set(self.finished_at)
