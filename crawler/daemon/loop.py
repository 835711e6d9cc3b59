"""The crawl cycle the daemon repeats: seeds -> generate -> fetch -> updatedb -> invertlinks (-> dedup).

The daemon owns no crawl logic: it sequences the jobs. The jobs are synchronous
(DuckDB) and run in a thread, one at a time, so the event loop keeps fetching
and keeps answering ``/metrics`` meanwhile. A cycle is one segment merged:
generated (or left unfinished by an earlier run, which is resumed first, as
``crawler crawl`` does), fetched, then updatedb and invertlinks, and dedup every
``daemon.dedup_every`` cycles.

No idle tail: fetches are tasks beside the loop, any number at once. Whenever
the hosts the running fetches still hold cannot keep every worker busy
(``overlap.in_tail``), the loop generates another segment without those hosts
and starts it. Each segment is merged as soon as its own fetch completes,
whatever older fetches still run: generate already leaves out the URLs of every
unmerged segment, so the order of merges does not matter, and waiting for a slow
older segment would bring the tail back. Every fetch shares one ``FetchShared``
(daemon/shared.py): one politeness state, so concurrency and per-host delays
hold for the process; one robots.txt cache; and the URLs each running segment
holds (its fetchlist, the redirect targets it took), so a redirect target one
segment fetched is neither generated into nor fetched by another.

With Spark jobs over an ``s3://`` crawl_dir (``staged_by_step``) each job and
each fetch is staged as its command would be (crawler/storage/steps.py), as
``crawl`` does: the jobs by reference, so the executors use the bucket and any
spark.master works; a fetch in the ordinary staging copy with its partitions
leased, publishing before its segment is merged. The daemon then holds the
crawl_dir's ``crawl.lock`` for its life instead of the stores' leases.

Between steps the loop sleeps until something could change what generate
finds (wake.py lists the reasons): a seed file in ``daemon.seeds`` (watched),
a merge, the next URL coming due, a waiting host freed, a fetch ending, SIGHUP;
``daemon.idle_sleep`` is the longest sleep. Generate runs only for such a reason.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from structlog.contextvars import bound_contextvars

from crawler.commands.cycle import segments_dir, unfinished_segments
from crawler.config import CrawlerConfig
from crawler.daemon.figures import webdb_figures
from crawler.daemon.outlook import webdb_outlook
from crawler.daemon.overlap import HostTracker, hosts_left, in_tail
from crawler.daemon.reload import Reload
from crawler.daemon.retention import prune_segments
from crawler.daemon.seeds import STATE_FILE, SeedWatcher
from crawler.daemon.shared import FetchShared, fetchlist_hashes
from crawler.daemon.status import DaemonStatus
from crawler.daemon.wake import UNKNOWN, Outlook, Wake, utc_now
from crawler.daemon.watch import watch_seeds
from crawler.errors import CrawlerError, SegmentError
from crawler.fetcher.events import FetchDone, FetchProgress
from crawler.fetcher.known import KnownFetched
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.runner import fetch_gc
from crawler.fetcher.service import Fetcher
from crawler.fsutil import TEMP_PREFIX, remove_temp_files, remove_tree
from crawler.jobs.generate import generate
from crawler.jobs.readdb import db_stats
from crawler.jobs.updatedb import updatedb
from crawler.metrics import Metrics
from crawler.segments.layout import Segment, list_segments, open_segment
from crawler.storage.access import Access
from crawler.storage.retention import prune_remote_segments
from crawler.storage.session import publish_round, staged_by_step
from crawler.storage.steps import FETCHLIST, STATE, as_command, reference_tree
from crawler.webdb.store import VersionedStore

# Jobs other issues are still building: run when their module exists, skipped (and said once) until then.
OPTIONAL_JOBS = {
    "invertlinks": "crawler.jobs.invertlinks:invertlinks",
    "dedup": "crawler.jobs.dedup:dedup",
}


# Seed files are injected as inject is, and the seed memory goes with them (pulled before, published after).
SEEDS = Access(writes=("webdb",), engine_io=True, files=(STATE_FILE,))


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
    task: asyncio.Task[Any] | None  # None: fetched by an earlier run, only the merge is left
    fetcher: Fetcher | None
    tracker: HostTracker | None
    started: float
    number: int  # its cycle: segments are numbered as they start, and a cycle ends when its segment is merged
    selected: int | None = None
    generate_seconds: float | None = None
    ended: float | None = None


class CrawlLoop:
    def __init__(self, config: Callable[[], CrawlerConfig], metrics: Metrics, status: DaemonStatus,
                 stop: asyncio.Event, log: Any) -> None:
        self.config = config  # the current config: SIGHUP may replace it between two steps
        self.metrics = metrics
        self.status = status
        self.stop = stop
        self.log = log
        self.running: dict[str, RunningFetch] = {}  # fetching now
        self.unmerged: dict[str, RunningFetch] = {}  # started by this run, not merged yet (fetching or finished)
        self.finished: deque[RunningFetch] = deque()  # fetches that ended, in the order they ended
        self.cycles = 0  # segments merged
        self.numbered = 0  # segments started (or taken up to merge)
        self.shared = FetchShared(config(), log)
        self.parse_pool: ParsePool | None = None
        self.by_step = staged_by_step(config())  # read at start: a SIGHUP cannot move the crawl_dir
        # Staged by step, the seed memory lives where the inject step pulls it, in the reference tree.
        self.seeds = SeedWatcher((reference_tree(config()) if self.by_step else config().crawl_path) / STATE_FILE)
        # What changed since generate last ran, and when to look again.
        self.wake = Wake(on_skip=lambda cause: metrics.generate_skipped.labels(cause).inc())
        self._look_back = True  # segments an earlier run (or a failed step) left unmerged may exist
        # While fetches run, generate at most half the time: on a large webdb one generate takes a while.
        self._generate_after = 0.0

    async def run(self) -> None:
        await asyncio.to_thread(self.recover)
        cfg = self.config()
        if cfg.fetcher.processes > 1:
            self.log.warning("daemon.one_fetch_process", processes=cfg.fetcher.processes,
                             reason="the daemon fetches in its own process, so that its concurrent segments share "
                                    "one politeness state; fetcher.processes applies to crawler fetch and crawl")
        for name in OPTIONAL_JOBS:
            if optional_job(name) is None:
                self.log.info("daemon.job_unavailable", job=name, reason="not built yet; the cycle skips it")
        if cfg.fetcher.parse and cfg.fetcher.parse_processes > 0:
            # One pool for the daemon's life, shared by its concurrent fetches (crawl keeps one across rounds):
            # starting the processes costs about 0.5 s. Read at start; a SIGHUP does not resize it.
            self.parse_pool = ParsePool(cfg, cfg.fetcher.parse_processes)
            self.log.info("daemon.parse_pool", processes=cfg.fetcher.parse_processes)
        watcher = asyncio.create_task(watch_seeds(lambda: Path(self.config().daemon.seeds),
                                                  lambda: self.wake.changed("seeds"), self.stop, self.log))
        try:
            while not self.stop.is_set():
                cfg = self.config()
                if cfg.daemon.max_cycles and self.cycles >= cfg.daemon.max_cycles:
                    self.log.info("daemon.max_cycles", cycles=self.cycles)
                    break
                outcome = await self.step(cfg)
                if outcome == "failed":
                    self.status.phase = "idle"
                    await self._sleep(cfg.daemon.idle_sleep)
                    self.wake.note("retry")
                elif outcome in ("idle", "wait"):
                    self.status.phase = "idle" if outcome == "idle" else "fetch"
                    await self._wait(cfg)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await self._drain()
            await self.shared.aclose()
            if self.parse_pool is not None:
                await asyncio.to_thread(self.parse_pool.close)

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
                      to_resume=[name for name, _, _ in self._unfinished(cfg)])

    @contextlib.contextmanager
    def _as(self, cfg: CrawlerConfig, command: str | Access,
            **values: Any) -> Iterator[tuple[CrawlerConfig, argparse.Namespace]]:
        """Where a step runs: the daemon's own tree, or staged as its command (Spark jobs over a bucket)."""
        if not self.by_step:
            yield cfg, argparse.Namespace(**values)
            return
        with as_command(cfg, command, **values) as staged:
            yield staged

    def _unfinished(self, cfg: CrawlerConfig) -> list[tuple[str, str, bool]]:
        """(name, state, fetched) of the segments generated but not merged, oldest first."""
        with self._as(cfg, STATE) as (state, _):
            return [(s.name, s.state, s.is_done("fetcher")) for s in unfinished_segments(state)]

    def _listed(self, cfg: CrawlerConfig, name: str) -> KnownFetched:
        with self._as(cfg, FETCHLIST, segment=name, partition=None, spark=True) as (run_cfg, _):
            return fetchlist_hashes(open_segment(segments_dir(run_cfg) / name))

    async def step(self, cfg: CrawlerConfig) -> str:
        """Merge what finished, resume or generate what is due; returns busy, wait, idle, failed or stopped."""
        self.wake.looking()
        while self.finished:
            if not await self._merge(self.finished.popleft()):
                self._look_back = True
                return "failed"
        if self.stop.is_set():
            return "stopped"
        if cfg.daemon.max_cycles and self.cycles + len(self.unmerged) >= cfg.daemon.max_cycles:
            return "wait" if self.unmerged else "busy"
        try:
            if self._look_back:
                self._look_back = False
                if await self._resume(cfg):
                    return "busy"
            return await self._generate(cfg)
        except CrawlerError as exc:
            self.log.error("cycle.failed", error=str(exc), phase=self.status.phase)
        except Exception as exc:  # noqa: BLE001 - a long-running service logs a bug and goes on
            self.log.exception("cycle.failed", error=repr(exc), phase=self.status.phase)
        self._look_back = True
        self.metrics.cycle_finished("failed", None, {})
        return "failed"

    async def _resume(self, cfg: CrawlerConfig) -> bool:
        """Take up segments an earlier run (or a failed step) left generated or fetched but not merged."""
        resumed = False
        for name, state, fetched in await asyncio.to_thread(self._unfinished, cfg):  # oldest first
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
                await self._start_fetch(name)
        return resumed

    async def _generate(self, cfg: CrawlerConfig) -> str:
        waiting = "wait" if self.unmerged else "idle"
        if not self.wake.reasons:
            return waiting  # nothing changed: generate would find what it found last time
        trackers = [f.tracker for f in self.running.values() if f.tracker is not None]
        if self.running and not (cfg.daemon.overlap and in_tail(trackers, cfg.fetcher)
                                 and time.monotonic() >= self._generate_after):
            return "wait"
        reasons, skipped = self.wake.take()
        phases: dict[str, float] = {}
        injected = await self._phase("inject", phases, self._inject_seeds, cfg)
        self.metrics.phase_seconds.labels("inject").observe(phases["inject"])
        if not injected and reasons == {"seeds"}:  # a folder event with no new content (a deletion, a touch)
            self.wake.skipped.update(skipped)
            self.wake.skip("seeds")
            return waiting
        self.log.info("daemon.wake", reasons=sorted(reasons), skipped=dict(skipped), seeds_injected=injected)
        busy: set[str] = set().union(*(t.busy_hosts() for t in trackers))
        t0 = time.monotonic()
        # Redirect targets the running segments took are fetched there: not again in this one.
        report, outlook = await self._phase("generate", phases, self._generate_job, cfg, busy,
                                            self.shared.held.hop_targets())
        self._generate_after = time.monotonic() + phases["generate"]
        self.wake.generated(outlook)
        if report is None:
            if self.unmerged:
                return "wait"
            self.log.info("daemon.idle", reason=f"no crawl database yet: drop seed files into {cfg.daemon.seeds}",
                          sleep_s=cfg.daemon.idle_sleep)
            return "idle"
        self.metrics.generate_runs.labels("segment" if report.segment else "nothing").inc()
        if report.segment is None:
            if self.unmerged:  # fetching, or fetched (maybe during this generate) and about to be merged
                self.log.debug("daemon.overlap_skipped", reason="nothing due outside the busy hosts",
                               busy_hosts=len(busy), waiting_hosts=len(outlook.waiting or ()),
                               fetching=sorted(self.running))
                return "wait"
            sleep = self.wake.until_deadline()
            self.log.info("daemon.idle", reason="nothing due", next_due=_iso(outlook.next_due),
                          sleep_s=round(min(cfg.daemon.idle_sleep, sleep if sleep is not None else float("inf")), 3))
            return "idle"
        if self.stop.is_set():
            return "stopped"  # the segment stays generated; the next run fetches it first
        if self.running:
            self.log.info("daemon.overlap", next_segment=report.segment.name, selected=report.selected,
                          busy_hosts=len(busy), fetching=sorted(self.running))
        fetch = await self._start_fetch(report.segment.name, selected=report.selected)
        fetch.generate_seconds = time.monotonic() - t0
        return "busy"

    def _inject_seeds(self, cfg: CrawlerConfig) -> list[str]:
        if not self.by_step:
            return self.seeds.inject_new(cfg, self.log)
        if not self.seeds.has_new(cfg, self.log):  # a lease and a pull per generate otherwise
            return []
        with self._as(cfg, SEEDS) as (run_cfg, _):
            return self.seeds.inject_new(run_cfg, self.log)

    def _generate_job(self, cfg: CrawlerConfig, busy: set[str], hops: set[str]) -> tuple[Any, Outlook]:
        """generate's report (None while there is no crawl database yet), and what may change its answer."""
        with self._as(cfg, "generate", top_n=None, partitions=None) as (run_cfg, _):
            if VersionedStore(run_cfg.crawl_path / "webdb").current() is None:
                return None, UNKNOWN
            now = utc_now()
            report = generate(run_cfg, self.log, now, exclude_hosts=busy or None, exclude_urls=hops or None)
            try:
                return report, webdb_outlook(run_cfg, now, busy, hops, report.segment)
            except CrawlerError as exc:  # a hint only: without it, every wake-up may change the answer
                self.log.warning("daemon.outlook_failed", error=str(exc),
                                 fallback="generate runs on every host freed and every daemon.idle_sleep")
                return report, UNKNOWN

    def _open_fetch(self, cfg: CrawlerConfig, name: str,
                    stack: contextlib.ExitStack) -> tuple[CrawlerConfig, Segment, list[int] | None, Counter[str]]:
        """Stage the fetch of ``name`` (staged by step: its partitions leased and pulled) and read its fetchlist."""
        try:
            run_cfg, args = stack.enter_context(self._as(cfg, "fetch", segment=name, partition=None, spark=False))
            segment = open_segment(segments_dir(run_cfg) / name)
            return run_cfg, segment, args.partition, hosts_left(segment)
        except BaseException:
            stack.close()
            raise

    async def _start_fetch(self, name: str, *, selected: int | None = None) -> RunningFetch:
        cfg = self.config()  # read again: a SIGHUP during generate applies to this fetch
        step = contextlib.ExitStack()  # closed when the fetch ends: publishes what it fetched
        cfg, segment, partitions, remaining = await asyncio.to_thread(self._open_fetch, cfg, name, step)
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
        task.add_done_callback(lambda _task: self._fetch_ended(fetch))
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

    def _fetch_ended(self, fetch: RunningFetch) -> None:
        name = fetch.segment.name
        fetch.ended = time.monotonic()
        self.running.pop(name, None)
        self.shared.segment_ended(fetch.segment)
        self.status.fetch_ended(name)
        self.metrics.fetch_ended(name)
        self.metrics.segments_fetching.set(len(self.running))
        self.finished.append(fetch)
        self.wake.changed("fetch_ended")

    async def _merge(self, fetch: RunningFetch) -> bool:
        """One cycle's end: updatedb, invertlinks (dedup) and prune for a finished fetch; False if it failed."""
        self.unmerged.pop(fetch.segment.name, None)
        segment, number = fetch.segment, fetch.number
        phases: dict[str, float] = {}
        if fetch.generate_seconds is not None:
            phases["generate"] = fetch.generate_seconds
        if fetch.task is not None and fetch.ended is not None:
            phases["fetch"] = fetch.ended - fetch.started
        with bound_contextvars(cycle=number, segment=segment.name):
            try:
                report = None
                if fetch.task is not None:
                    if fetch.task.cancelled():
                        return True  # cut at shutdown: the next run resumes it
                    report = fetch.task.result()
                # Staged by step the fetch's copy may be gone: updatedb checks the bucket's marker instead.
                complete = report is None or not report.stopped if self.by_step else segment.is_done("fetcher")
                if not complete:
                    if self.stop.is_set():
                        self.metrics.cycle_finished("stopped", None, phases)
                        return True
                    raise SegmentError(f"{segment.path}: fetch did not complete")
                figures = await self._after_fetch(self.config(), segment, self.cycles + 1, phases)
            except CrawlerError as exc:
                self.log.error("cycle.failed", error=str(exc), phase=self.status.phase)
            except Exception as exc:  # noqa: BLE001 - a long-running service logs a bug and goes on
                self.log.exception("cycle.failed", error=repr(exc), phase=self.status.phase)
            else:
                self.cycles += 1
                self.wake.note("merged")
                self.shared.segment_merged(segment)
                self._done(number, fetch, phases, report, figures)
                return True
        self.metrics.cycle_finished("failed", None, phases)
        return False

    async def _after_fetch(self, cfg: CrawlerConfig, segment: Segment, number: int,
                           phases: dict[str, float]) -> dict[str, Any]:
        update, merged = await self._phase("updatedb", phases, self._updatedb, cfg, segment.name)
        self.metrics.outlinks_cut(update.over_cap)
        invert = optional_job("invertlinks")
        if invert is not None:
            await self._phase("invertlinks", phases, self._invertlinks, cfg, invert, segment.name)
        dedup = optional_job("dedup")
        if dedup is not None and cfg.daemon.dedup_every and number % cfg.daemon.dedup_every == 0:
            await self._phase("dedup", phases, self._job, cfg, "dedup", dedup)
        stats = await asyncio.to_thread(self._figures, cfg)
        self.metrics.webdb(stats["version"], stats["by_status"])
        await self._phase("prune", phases, prune_segments, segments_dir(cfg), merged,
                          cfg.daemon.keep_segments, cfg.daemon.archive_dir, self.log)
        if not self.by_step:  # staged by step, every step has published
            await self._phase("publish", phases, publish_round, cfg)  # a remote crawl_dir gets each cycle
        await self._phase("prune", phases, prune_remote_segments, cfg, merged, self.log)
        return {"new_urls": update.new_urls, "version": update.version, "db_urls": stats["urls"],
                "merged_fetched": update.fetched}

    def _updatedb(self, cfg: CrawlerConfig, name: str) -> tuple[Any, list[str]]:
        """updatedb's report and the segments the new version has merged."""
        with self._as(cfg, "updatedb", segments=[name]) as (run_cfg, _):
            segment = open_segment(segments_dir(run_cfg) / name)
            # A fetch cut short (a partition leased elsewhere, a signal) must not be merged as if complete.
            if not segment.is_done("fetcher"):
                raise SegmentError(f"{segment.path}: fetch did not complete")
            report = updatedb(run_cfg, [segment], self.log)
            return report, VersionedStore(run_cfg.crawl_path / "webdb").require_current().merged_segments

    def _invertlinks(self, cfg: CrawlerConfig, invert: Callable[..., Any], name: str) -> None:
        from crawler.jobs.invertlinks import unlinked_segments

        # With any segment an earlier cycle merged into the webdb but was cut off before inverting.
        with self._as(cfg, STATE) as (state, _):
            names = [s.name for s in unlinked_segments(state)] or [name]
        with self._as(cfg, "invertlinks", segments=names) as (run_cfg, _):
            invert(run_cfg, [open_segment(segments_dir(run_cfg) / n) for n in names], self.log)

    def _figures(self, cfg: CrawlerConfig) -> dict[str, Any]:
        if not self.by_step:
            return db_stats(cfg)
        with self._as(cfg, STATE) as (state, _):  # the webdb's parts stay in the bucket: the engine reads them
            return webdb_figures(state)

    def _job(self, cfg: CrawlerConfig, command: str, job: Callable[..., Any]) -> Any:
        with self._as(cfg, command) as (run_cfg, _):
            return job(run_cfg, self.log)

    def _done(self, number: int, fetch: RunningFetch, phases: dict[str, float], report: Any,
              figures: dict[str, Any]) -> None:
        elapsed = time.monotonic() - fetch.started + (fetch.generate_seconds or 0.0)
        fetched = report.fetched if report is not None else figures["merged_fetched"]
        fetch_s = phases.get("fetch", 0.0)
        summary = {
            "cycle": number,
            "segment": fetch.segment.name,
            "selected": fetch.selected,
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
                self.status.phase = "fetch" if self.running else "idle"

    def reconfigure(self, reload: Reload) -> bool:
        """Hand new fetcher limits to the shared politeness and the running fetches; False when none runs."""
        self.shared.politeness.reconfigure(reload.config.fetcher)
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
            if running.task is not None:
                running.task.cancel()

    async def _drain(self) -> None:
        """Wait for fetches still running (the stop event makes them commit and return)."""
        tasks = [r.task for r in self.running.values() if r.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _wait(self, cfg: CrawlerConfig) -> None:
        """Until something could change what generate finds, or a fetch ends; at most ``daemon.idle_sleep``.

        Once idle_sleep passes with nothing seen, the loop looks at what the watches might miss (a seed
        folder without change notifications, another command writing the webdb) before it sleeps again.
        """
        longest = cfg.daemon.idle_sleep
        hold = self._generate_after - time.monotonic()
        if self.running and self.wake.reasons and 0 < hold < longest:
            # A change came while generate was held back (at most half the time): look again when it may run.
            await self.wake.wait(self.stop, hold)
            return
        if await self.wake.wait(self.stop, longest) or self.stop.is_set():
            return
        reason = "idle_sleep" if self.by_step else await asyncio.to_thread(self._changed_outside, cfg)
        if reason is not None:
            self.wake.note(reason)
        elif not self.wake.reasons:
            self.wake.skip("idle_sleep")

    def _changed_outside(self, cfg: CrawlerConfig) -> str | None:
        """What changed that no watch reports: another command's webdb version, seeds on an unwatched folder.

        (Staged by step the version lives in the bucket: the loop generates once per idle_sleep instead.)
        """
        try:
            current = VersionedStore(cfg.crawl_path / "webdb").current()
        except CrawlerError:
            return "webdb"  # generate meets the same error and reports it as a failed cycle
        if (current.number if current else None) != self.wake.outlook.version:
            return "webdb"
        if self.seeds.has_new(cfg, self.log):
            return "seeds"
        return None

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)


def _iso(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None
