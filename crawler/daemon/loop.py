"""The crawl cycle the daemon repeats: seeds -> generate -> fetch -> updatedb -> invertlinks (-> dedup).

The daemon owns no crawl logic: it sequences the jobs. The jobs are synchronous
(DuckDB) and run in a thread, so the event loop keeps fetching and keeps
answering ``/metrics`` meanwhile. Each cycle first finishes what an earlier run
left: a segment generated or cut off but not merged is fetched (resumed) and
merged before anything new is generated, exactly as ``crawler crawl`` does.

No idle tail: while a segment's last slow hosts finish, the next segment is
generated without those hosts and its fetch starts next to the running one
(see ``overlap.py``); the next cycle then only waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from structlog.contextvars import bound_contextvars

from crawler.commands.cycle import segments_dir, unfinished_segments
from crawler.config import CrawlerConfig
from crawler.daemon.overlap import HostTracker, fetchlist_hosts
from crawler.daemon.reload import Reload
from crawler.daemon.retention import prune_segments
from crawler.daemon.seeds import STATE_FILE, SeedWatcher
from crawler.daemon.status import DaemonStatus
from crawler.errors import CrawlerError, SegmentError
from crawler.fetcher import service as fetch_service
from crawler.fetcher.events import FetchDone, FetchProgress
from crawler.fsutil import TEMP_PREFIX, remove_temp_files, remove_tree
from crawler.jobs.generate import generate
from crawler.jobs.readdb import db_stats
from crawler.jobs.updatedb import updatedb
from crawler.metrics import Metrics
from crawler.segments.layout import Segment, list_segments
from crawler.webdb.store import VersionedStore

# Jobs other issues are still building: run when their module exists, skipped (and said once) until then.
OPTIONAL_JOBS = {
    "invertlinks": "crawler.jobs.invertlinks:invertlinks",
    "dedup": "crawler.jobs.dedup:dedup",
}


def optional_job(name: str) -> Callable[..., Any] | None:
    module, _, attr = OPTIONAL_JOBS[name].partition(":")
    try:
        return getattr(importlib.import_module(module), attr, None)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


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
    task: asyncio.Task[Any]
    fetcher: Any  # a Fetcher we can reconfigure, or None when the fetcher cannot be
    tracker: HostTracker | None
    started: float
    selected: int | None = None
    generate_seconds: float | None = None


class CrawlLoop:
    def __init__(self, config: Callable[[], CrawlerConfig], metrics: Metrics, status: DaemonStatus,
                 stop: asyncio.Event, log: Any) -> None:
        self.config = config  # the current config: SIGHUP may replace it between two phases
        self.metrics = metrics
        self.status = status
        self.stop = stop
        self.log = log
        self.running: dict[str, RunningFetch] = {}
        self.pending: RunningFetch | None = None  # the next cycle's segment, already fetching (overlap)
        self.seeds = SeedWatcher(config().crawl_path / STATE_FILE)

    async def run(self) -> None:
        await asyncio.to_thread(self.recover)
        for name in OPTIONAL_JOBS:
            if optional_job(name) is None:
                self.log.info("daemon.job_unavailable", job=name, reason="not built yet; the cycle skips it")
        done = 0
        try:
            while not self.stop.is_set():
                cfg = self.config()
                if cfg.daemon.max_cycles and done >= cfg.daemon.max_cycles:
                    self.log.info("daemon.max_cycles", cycles=done)
                    break
                outcome = await self.cycle(done + 1)
                if outcome == "done":
                    done += 1
                elif outcome in ("idle", "failed"):
                    self.status.phase = "idle"
                    await self._sleep(cfg.daemon.idle_sleep)
        finally:
            await self._drain()

    def recover(self) -> None:
        """Undo what a killed run left: temp files, half-generated segments; say what will be resumed."""
        cfg = self.config()
        folder = segments_dir(cfg)
        removed = remove_temp_files(folder)
        incomplete = [s for s in list_segments(folder) if not s.is_done("fetchlist")]
        for segment in incomplete:
            remove_tree(segment.path)
        for name in ("webdb", "linkdb"):
            root = cfg.crawl_path / name
            if root.is_dir():
                removed += sum(1 for _ in root.rglob(f"{TEMP_PREFIX}*"))
                with VersionedStore(root).lock():
                    pass  # taking the lock removes what a killed writer left
        self.log.info("daemon.recovered", temp_files_removed=removed,
                      incomplete_segments_removed=[s.name for s in incomplete],
                      to_resume=[s.name for s in unfinished_segments(cfg)])

    async def cycle(self, number: int) -> str:
        """One cycle; returns done, idle (nothing due), failed or stopped."""
        cfg = self.config()
        started = time.monotonic()
        phases: dict[str, float] = {}
        self.status.cycle = number
        with bound_contextvars(cycle=number):
            try:
                await self._phase("inject", phases, self.seeds.inject_new, cfg, self.log)
                segment, running = await self._next_segment(phases)
                if segment is None:
                    self.metrics.cycle_finished("idle", None, phases)
                    return "idle"
                self.status.segment = segment.name
                with bound_contextvars(segment=segment.name):
                    report = await self._finish_fetch(running, number, phases) if running else None
                    if not segment.is_done("fetcher"):
                        if self.stop.is_set():
                            self.metrics.cycle_finished("stopped", None, phases)
                            return "stopped"
                        raise SegmentError(f"{segment.path}: fetch did not complete")
                    figures = await self._after_fetch(self.config(), segment, number, phases)
                    self._done(number, started, phases, running, report, figures)
                    return "done"
            except CrawlerError as exc:
                self.log.error("cycle.failed", error=str(exc), phase=self.status.phase)
            except Exception as exc:  # noqa: BLE001 - a long-running service logs a bug and goes on
                self.log.exception("cycle.failed", error=repr(exc), phase=self.status.phase)
            self.metrics.cycle_finished("failed", None, phases)
            return "failed"

    async def _next_segment(self, phases: dict[str, float]) -> tuple[Segment | None, RunningFetch | None]:
        cfg = self.config()  # read again: a SIGHUP during the inject phase applies to this segment
        if self.pending is not None:
            running, self.pending = self.pending, None
            if running.generate_seconds is not None:
                phases["generate"] = running.generate_seconds
            return running.segment, running
        for segment in unfinished_segments(cfg):  # oldest first
            if segment.name in self.running:
                continue
            self.log.info("daemon.resume", segment=segment.name, state=segment.state)
            if segment.is_done("fetcher"):
                return segment, None
            return segment, await self._start_fetch(segment, track=False)
        if VersionedStore(cfg.crawl_path / "webdb").current() is None:
            self.log.info("daemon.idle", reason=f"no crawl database yet: drop seed files into {cfg.daemon.seeds}")
            return None, None
        t0 = time.monotonic()
        report = await self._phase("generate", phases, generate, cfg, self.log)
        if report.segment is None:
            self.log.info("daemon.idle", reason="nothing due", sleep_s=cfg.daemon.idle_sleep)
            return None, None
        running = await self._start_fetch(report.segment, track=True, selected=report.selected)
        running.generate_seconds = time.monotonic() - t0
        return report.segment, running

    async def _start_fetch(self, segment: Segment, *, track: bool, selected: int | None = None) -> RunningFetch:
        cfg = self.config()  # read again: a SIGHUP during generate applies to this fetch
        tracker = None
        if track and cfg.daemon.overlap:
            tracker = HostTracker(await asyncio.to_thread(fetchlist_hosts, segment.parts("fetchlist")), cfg.fetcher)
        observer = Observers(self.metrics, self.status, tracker)
        fetcher = None
        with bound_contextvars(segment=segment.name, phase="fetch"):
            if hasattr(fetch_service.Fetcher, "reconfigure"):
                # Held so that SIGHUP can change its limits while it runs.
                fetcher = fetch_service.Fetcher(cfg, segment, self.log, stop=self.stop, observer=observer)
                task = asyncio.create_task(fetcher.run())
            else:
                task = asyncio.create_task(
                    fetch_service.fetch_segment(cfg, segment, self.log, stop=self.stop, observer=observer))
        running = RunningFetch(segment, task, fetcher, tracker, time.monotonic(), selected)
        self.running[segment.name] = running
        self.status.fetch_started(segment.name)
        self.metrics.segments_fetching.set(len(self.running))
        task.add_done_callback(lambda _task: self._fetch_ended(segment.name))
        return running

    def _fetch_ended(self, name: str) -> None:
        self.running.pop(name, None)
        self.status.fetch_ended(name)
        self.metrics.fetch_ended(name)
        self.metrics.segments_fetching.set(len(self.running))

    async def _finish_fetch(self, running: RunningFetch, number: int, phases: dict[str, float]) -> Any:
        """Wait for the segment's fetch; when its tail starts, generate and start the next one."""
        self.status.phase = "fetch"
        with bound_contextvars(phase="fetch"):
            watch = running.tracker is not None and self._may_overlap(self.config(), number)
            while True:
                tail = asyncio.ensure_future(running.tracker.tail.wait()) if watch and running.tracker else None
                try:
                    done, _ = await asyncio.wait({running.task, *([tail] if tail else [])},
                                                 return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if tail is not None:
                        tail.cancel()
                if running.task in done:
                    break
                watch = False
                self.pending = await self._overlap(running, number + 1)
        phases["fetch"] = time.monotonic() - running.started
        return running.task.result()

    def _may_overlap(self, cfg: CrawlerConfig, number: int) -> bool:
        last = bool(cfg.daemon.max_cycles) and number >= cfg.daemon.max_cycles
        return cfg.daemon.overlap and not last and not self.stop.is_set() and self.pending is None

    async def _overlap(self, running: RunningFetch, number: int) -> RunningFetch | None:
        cfg = self.config()
        assert running.tracker is not None
        busy = running.tracker.busy_hosts()
        t0 = time.monotonic()
        with bound_contextvars(cycle=number, phase="generate", segment=None):
            report = await asyncio.to_thread(partial(generate, cfg, self.log, exclude_hosts=busy))
            if report.segment is None:
                self.log.info("daemon.overlap_skipped", reason="nothing due outside the busy hosts",
                              busy_hosts=len(busy))
                return None
            if self.stop.is_set():
                return None  # the segment stays generated; the next run fetches it first
            self.log.info("daemon.overlap", next_segment=report.segment.name, selected=report.selected,
                          busy_hosts=len(busy))
            with bound_contextvars(segment=report.segment.name):
                pending = await self._start_fetch(report.segment, track=True, selected=report.selected)
        pending.generate_seconds = time.monotonic() - t0
        return pending

    async def _after_fetch(self, cfg: CrawlerConfig, segment: Segment, number: int,
                           phases: dict[str, float]) -> dict[str, Any]:
        update = await self._phase("updatedb", phases, updatedb, cfg, [segment], self.log)
        invert = optional_job("invertlinks")
        if invert is not None:
            await self._phase("invertlinks", phases, invert, cfg, [segment], self.log)
        dedup = optional_job("dedup")
        if dedup is not None and cfg.daemon.dedup_every and number % cfg.daemon.dedup_every == 0:
            await self._phase("dedup", phases, dedup, cfg, self.log)
        stats = await asyncio.to_thread(db_stats, cfg)
        self.metrics.webdb(stats["version"], stats["by_status"])
        version = VersionedStore(cfg.crawl_path / "webdb").require_current()
        await self._phase("prune", phases, prune_segments, segments_dir(cfg), version.merged_segments,
                          cfg.daemon.keep_segments, cfg.daemon.archive_dir, self.log)
        return {"new_urls": update.new_urls, "version": update.version, "db_urls": stats["urls"],
                "merged_fetched": update.fetched}

    def _done(self, number: int, started: float, phases: dict[str, float], running: RunningFetch | None,
              report: Any, figures: dict[str, Any]) -> None:
        elapsed = time.monotonic() - started
        fetched = report.fetched if report is not None else figures["merged_fetched"]
        fetch_s = phases.get("fetch", 0.0)
        summary = {
            "cycle": number,
            "segment": self.status.segment,
            "selected": running.selected if running else None,
            "fetched": fetched,
            "bytes": report.bytes if report is not None else 0,
            "by_status": report.by_status if report is not None else {},
            "new_urls": figures["new_urls"],
            "version": figures["version"],
            "db_urls": figures["db_urls"],
            "pages_per_second": round(fetched / fetch_s, 2) if fetch_s else None,
            "elapsed_s": round(elapsed, 3),
            "phases_s": {k: round(v, 3) for k, v in phases.items()},
        }
        self.status.last_cycle = summary
        self.metrics.cycle_finished("done", elapsed, phases)
        self.log.info("cycle.done", **{k: v for k, v in summary.items() if k not in ("cycle", "segment")})

    async def _phase(self, name: str, phases: dict[str, float], func: Callable[..., Any], *args: Any) -> Any:
        """Run a synchronous job in a thread, with the phase bound in logs and shown in /status."""
        self.status.phase = name
        t0 = time.monotonic()
        with bound_contextvars(phase=name):
            try:
                return await asyncio.to_thread(func, *args)
            finally:
                phases[name] = phases.get(name, 0.0) + time.monotonic() - t0

    def reconfigure(self, reload: Reload) -> bool:
        """Hand new fetcher limits to the running fetches; False when none could take them."""
        applied = False
        for running in list(self.running.values()):
            if running.tracker is not None:
                running.tracker.reconfigure(reload.config.fetcher)
            if running.fetcher is not None:
                running.fetcher.reconfigure(reload.config.fetcher)
                applied = True
        return applied

    def cancel_fetches(self) -> None:
        for running in list(self.running.values()):
            running.task.cancel()

    async def _drain(self) -> None:
        """Wait for fetches still running (the stop event makes them commit and return)."""
        tasks = [r.task for r in self.running.values()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)
