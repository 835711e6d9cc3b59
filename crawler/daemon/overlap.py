"""No idle tail: know which hosts the running fetches still hold, and when their workers start to idle.

At the end of a segment only a few slow hosts are left, each held to its
politeness delay, and most workers wait. A tracker per running fetch counts
that segment's fetchlist entries down, host by host, as results arrive
(``FetchDone``), so the daemon knows the hosts that still have work without
looking inside the fetcher. Once all those hosts together can no longer keep
every worker busy (hosts x per-host limit < concurrency: ``in_tail``), the
daemon generates another segment *without* them (and without hosts whose last
request ended less than ``fetcher.min_delay`` ago) and fetches it beside the
others, as many times as the tail lasts.

Keeping busy hosts out is an optimisation: it keeps a host's URLs in the fetch
that already waits on its delay. Politeness itself holds because every fetch of
the daemon shares one ``SharedPoliteness`` (crawler/fetcher/politeness.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow.parquet as pq

from crawler.config import FetcherConfig
from crawler.fetcher.events import FetchDone, FetchProgress
from crawler.segments.layout import Segment


def part_hosts(parts: list[Path]) -> Counter[str]:
    """Rows per host in the given Parquet parts (fetchlist or fetcher)."""
    counts: Counter[str] = Counter()
    for part in parts:
        for batch in pq.ParquetFile(part).iter_batches(columns=["host"], batch_size=65_536):
            counts.update(batch.column(0).to_pylist())
    return counts


def hosts_left(segment: Segment) -> Counter[str]:
    """Entries per host still to fetch: the fetchlist less what a cut-off run already committed."""
    return part_hosts(segment.parts("fetchlist")) - part_hosts(segment.parts("fetcher"))


class HostTracker:
    """A ``FetchObserver`` that counts a running segment's entries down, host by host."""

    def __init__(self, remaining: Counter[str], cfg: FetcherConfig, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[str, float], None] | None = None) -> None:
        self.remaining = dict(remaining)
        self.cfg = cfg
        self.clock = clock
        # (host, when it leaves busy_hosts): a host has no work left in this segment
        self.on_change = on_change
        self.finished_at: dict[str, float] = {}

    def fetch_done(self, event: FetchDone) -> None:
        left = self.remaining.get(event.host)
        if left is None:
            return
        if left <= 1:
            del self.remaining[event.host]
            at = self.finished_at[event.host] = self.clock()
            if self.on_change is not None:
                self.on_change(event.host, at + self.cfg.min_delay)
        else:
            self.remaining[event.host] = left - 1

    def progress(self, event: FetchProgress) -> None:
        pass

    def reconfigure(self, cfg: FetcherConfig) -> None:
        self.cfg = cfg

    def busy_hosts(self) -> set[str]:
        """Hosts another segment should leave out now: work left, or a request ended within the delay."""
        recent = self.clock() - self.cfg.min_delay
        for host in [h for h, at in self.finished_at.items() if at < recent]:
            del self.finished_at[host]
        return set(self.remaining) | set(self.finished_at)


def in_tail(trackers: Iterable[HostTracker], cfg: FetcherConfig) -> bool:
    """Whether the hosts the running fetches still hold can no longer keep every worker busy."""
    return sum(len(t.remaining) for t in trackers) * cfg.per_host_concurrency < cfg.concurrency
