"""The daemon's fetches: started as tasks beside its loop, any number at once, each tracked until merged.

Every fetch shares one ``FetchShared`` (daemon/shared.py): one politeness state,
so concurrency and per-host delays hold for the process; one robots.txt cache;
and the URLs each running segment holds. A fetch is a step of the workspace
(crawler/storage/workspace.py): staged by step, its partitions are leased and
pulled before it starts and published when it ends, before its merge.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from structlog.contextvars import bound_contextvars

from crawler.config import CrawlerConfig
from crawler.daemon.overlap import HostTracker, hosts_left
from crawler.daemon.shared import FetchShared, fetchlist_hashes
from crawler.daemon.status import DaemonStatus
from crawler.daemon.wake import Wake
from crawler.fetcher import forkserver
from crawler.fetcher.events import FetchDone, FetchProgress
from crawler.fetcher.known import KnownFetched
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.runner import fetch_gc
from crawler.fetcher.service import Fetcher
from crawler.metrics import Metrics
from crawler.segments.layout import Segment, open_segment
from crawler.segments.listing import segments_dir, unfinished_segments
from crawler.storage.access import FETCHLIST, STATE
from crawler.storage.workspace import FetchArgs, NoArgs, Workspace


class Observers:
    """Fans fetch events out to several observers (metrics, status, host tracker)."""

    def __init__(self, *observers: Any) -> None:
        self.observers = [o for o in observers if o is not None]

    def fetch_done(self, event: FetchDone) -> None:
        for observer in self.observers:
            observer.fetch_done(event)

    def progress(self, event: FetchProgress) -> None:
        for observer in self.observers:
            observer.progress(event)


@dataclass
class RunningFetch:
    segment: Segment
    task: asyncio.Task[Any] | None  # None: fetched by an earlier run, only the merge is left
    fetcher: Fetcher | None
    tracker: HostTracker | None
    started: float
    number: int  # its cycle: segments are numbered as they start, and a cycle ends when its segment is merged
    selected: int | None = None
    generate_seconds: float | None = None
    ended: float | None = None


class Fetches:
    def __init__(self, config: Callable[[], CrawlerConfig], workspace: Workspace, metrics: Metrics,
                 status: DaemonStatus, wake: Wake, stop: asyncio.Event, log: Any) -> None:
        self.config = config
        self.workspace = workspace
        self.metrics = metrics
        self.status = status
        self.wake = wake
        self.stop = stop
        self.log = log
        self.running: dict[str, RunningFetch] = {}  # fetching now
        self.unmerged: dict[str, RunningFetch] = {}  # started by this run, not merged yet (fetching or finished)
        self.finished: deque[RunningFetch] = deque()  # fetches that ended, in the order they ended
        self.numbered = 0  # segments started (or taken up to merge)
        self.shared = FetchShared(config(), log)
        self.parse_pool: ParsePool | None = None

    def open_parse_pool(self, cfg: CrawlerConfig) -> None:
        if forkserver.wanted(cfg):
            # One pool for the daemon's life, shared by its concurrent fetches (crawl keeps one across rounds):
            # starting the processes costs about 0.5 s. Read at start; a SIGHUP does not resize it.
            self.parse_pool = ParsePool(cfg, cfg.fetcher.parse_processes)
            self.log.info("daemon.parse_pool", processes=cfg.fetcher.parse_processes)

    async def aclose(self) -> None:
        """Wait for fetches still running (the stop event makes them commit and return), then close what they share."""
        tasks = [r.task for r in self.running.values() if r.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.shared.aclose()
        if self.parse_pool is not None:
            await asyncio.to_thread(self.parse_pool.close)

    def trackers(self) -> list[HostTracker]:
        return [f.tracker for f in self.running.values() if f.tracker is not None]

    def unfinished(self, cfg: CrawlerConfig) -> list[tuple[str, str, bool]]:
        """(name, state, fetched) of the segments generated but not merged, oldest first."""
        with self.workspace.step(cfg, STATE, NoArgs()) as run:
            return [(s.name, s.state, s.fetched) for s in unfinished_segments(run.cfg)]

    def _listed(self, cfg: CrawlerConfig, name: str) -> KnownFetched:
        with self.workspace.step(cfg, FETCHLIST, FetchArgs(name, spark=True)) as run:
            return fetchlist_hashes(open_segment(segments_dir(run.cfg) / name))

    async def resume(self, cfg: CrawlerConfig) -> bool:
        """Take up segments an earlier run (or a failed step) left generated or fetched but not merged."""
        resumed = False
        for name, state, fetched in await asyncio.to_thread(self.unfinished, cfg):  # oldest first
            if name in self.unmerged:
                continue
            self.log.info("daemon.resume", segment=name, state=state)
            resumed = True
            if fetched:
                segment = Segment(segments_dir(cfg) / name)
                self.shared.segment_starts(segment, await asyncio.to_thread(self._listed, cfg, name), fetching=False)
                fetch = RunningFetch(segment, None, None, None, time.monotonic(), self._number())
                self.unmerged[name] = fetch
                self.finished.append(fetch)
            else:
                await self.start(name)
        return resumed

    def _open(self, cfg: CrawlerConfig, name: str,
              stack: contextlib.ExitStack) -> tuple[CrawlerConfig, Segment, list[int] | None, Counter[str]]:
        """Stage the fetch of ``name`` (staged by step: its partitions leased and pulled) and read its fetchlist."""
        try:
            run = stack.enter_context(self.workspace.step(cfg, "fetch", FetchArgs(name)))
            segment = open_segment(segments_dir(run.cfg) / name)
            return run.cfg, segment, run.args.partition, hosts_left(segment)
        except BaseException:
            stack.close()
            raise

    async def start(self, name: str, *, selected: int | None = None) -> RunningFetch:
        cfg = self.config()  # read again: a SIGHUP during generate applies to this fetch
        step = contextlib.ExitStack()  # closed when the fetch ends: publishes what it fetched
        cfg, segment, partitions, remaining = await asyncio.to_thread(self._open, cfg, name, step)
        try:
            self.shared.segment_starts(segment, await asyncio.to_thread(fetchlist_hashes, segment))
        except BaseException:
            await asyncio.to_thread(step.close)
            raise
        tracker = HostTracker(remaining, cfg.fetcher, on_change=self._host_freed)
        observer = Observers(self.metrics, self.status, tracker)
        number = self._number()
        with bound_contextvars(cycle=number, segment=segment.name, phase="fetch"):
            # Held so that SIGHUP can change its limits while it runs.
            fetcher = Fetcher(cfg, segment, self.log, stop=self.stop, observer=observer, parse_pool=self.parse_pool,
                              **self.shared.fetcher_kwargs())
            task = asyncio.create_task(self._fetch(fetcher, partitions, step))
        fetch = RunningFetch(segment, task, fetcher, tracker, time.monotonic(), number, selected)
        self.running[segment.name] = self.unmerged[segment.name] = fetch
        self.status.segment = segment.name
        self.status.cycle = number
        self.status.fetch_started(segment.name)
        self.metrics.segments_fetching.set(len(self.running))
        task.add_done_callback(lambda _task: self._ended(fetch))
        return fetch

    @staticmethod
    async def _fetch(fetcher: Fetcher, partitions: list[int] | None, step: contextlib.ExitStack) -> Any:
        """The fetch, then the end of its step: staged by step, its partitions are published before the merge."""
        try:
            with fetch_gc():  # shared by overlapping fetches: put back when the last one ends
                report = await fetcher.run(partitions)
        except BaseException as exc:
            await asyncio.to_thread(step.__exit__, type(exc), exc, exc.__traceback__)
            raise
        await asyncio.to_thread(step.close)
        return report

    def _number(self) -> int:
        self.numbered += 1
        return self.numbered

    def _host_freed(self, host: str, free_at: float) -> None:
        held = any(host in f.tracker.remaining for f in self.running.values() if f.tracker is not None)
        self.wake.host_freed(host, free_at, held)

    def _ended(self, fetch: RunningFetch) -> None:
        name = fetch.segment.name
        fetch.ended = time.monotonic()
        self.running.pop(name, None)
        self.shared.segment_ended(fetch.segment)
        self.status.fetch_ended(name)
        self.metrics.fetch_ended(name)
        self.metrics.segments_fetching.set(len(self.running))
        self.finished.append(fetch)
        self.wake.changed("fetch_ended")

    def reconfigure(self, fetcher_config: Any) -> bool:
        """Hand new fetcher limits to the shared politeness and the running fetches; False when none runs."""
        self.shared.politeness.reconfigure(fetcher_config)
        applied = False
        for running in list(self.running.values()):
            if running.tracker is not None:
                running.tracker.reconfigure(fetcher_config)
            if running.fetcher is not None:
                running.fetcher.reconfigure(fetcher_config)
                applied = True
        return applied

    def cancel(self) -> None:
        for running in list(self.running.values()):
            if running.task is not None:
                running.task.cancel()
