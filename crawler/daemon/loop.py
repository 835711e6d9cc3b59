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

Where the crawl lives is the workspace's business (crawler/storage/workspace.py):
each job and each fetch is one of its steps. With Spark jobs over an ``s3://``
crawl_dir each step is staged as its command would be, as ``crawl`` does: the
jobs by reference, so the executors use the bucket and any spark.master works;
a fetch in the ordinary staging copy with its partitions leased, publishing
before its segment is merged. The daemon then holds the crawl_dir's
``crawl.lock`` for its life instead of the stores' leases.

The parts: fetches.py starts and tracks the fetches, next_segment.py decides
when to generate (and overlap), merge.py ends a cycle, accounting.py reports it.

Between steps the loop sleeps until something could change what generate
finds (wake.py lists the reasons): a seed file in ``daemon.seeds`` (watched),
a merge, the next URL coming due, a waiting host freed, a fetch ending, SIGHUP;
``daemon.idle_sleep`` is the longest sleep. Generate runs only for such a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.daemon.accounting import Accounting
from crawler.daemon.fetches import Fetches, RunningFetch
from crawler.daemon.merge import Merger
from crawler.daemon.next_segment import NextSegment
from crawler.daemon.reload import Reload
from crawler.daemon.seeds import STATE_FILE, SeedWatcher
from crawler.daemon.status import DaemonStatus
from crawler.daemon.wake import Wake
from crawler.daemon.watch import watch_seeds
from crawler.errors import CrawlerError
from crawler.fsutil import TEMP_PREFIX, remove_temp_files, remove_tree
from crawler.metrics import Metrics
from crawler.segments.layout import list_segments
from crawler.segments.listing import segments_dir
from crawler.storage.workspace import open_workspace
from crawler.webdb.store import VersionedStore


class CrawlLoop:
    def __init__(self, config: Callable[[], CrawlerConfig], metrics: Metrics, status: DaemonStatus,
                 stop: asyncio.Event, log: Any) -> None:
        self.config = config  # the current config: SIGHUP may replace it between two steps
        self.metrics = metrics
        self.status = status
        self.stop = stop
        self.log = log
        self.workspace = open_workspace(config())  # chosen at start: a SIGHUP cannot move the crawl_dir
        # The seed memory lives where the inject step works (staged by step: the reference tree).
        self.seeds = SeedWatcher(self.workspace.state_path(config()) / STATE_FILE)
        # What changed since generate last ran, and when to look again.
        self.wake = Wake(on_skip=lambda cause: metrics.generate_skipped.labels(cause).inc())
        self.fetches = Fetches(config, self.workspace, metrics, status, self.wake, stop, log)
        self.accounting = Accounting(metrics, status, lambda: bool(self.fetches.running), log)
        self.merger = Merger(config, self.workspace, self.fetches, self.accounting, metrics, self.wake, stop, log)
        self.next = NextSegment(self.workspace, self.fetches, self.seeds, self.wake, self.accounting, metrics,
                                stop, log)
        self._look_back = True  # segments an earlier run (or a failed step) left unmerged may exist

    @property
    def running(self) -> dict[str, RunningFetch]:
        return self.fetches.running

    @property
    def cycles(self) -> int:
        return self.accounting.cycles

    async def run(self) -> None:
        await asyncio.to_thread(self.recover)
        cfg = self.config()
        if cfg.fetcher.processes > 1:
            self.log.warning("daemon.one_fetch_process", processes=cfg.fetcher.processes,
                             reason="the daemon fetches in its own process, so that its concurrent segments share "
                                    "one politeness state; fetcher.processes applies to crawler fetch and crawl")
        # In a thread: forking the pool waits for the fork server's imports if they are not done yet, and the
        # daemon's endpoint answers on this loop meanwhile (the pool binds to the loop at its first page).
        await asyncio.to_thread(self.fetches.open_parse_pool, cfg)
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
            await self.fetches.aclose()

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
                      to_resume=[name for name, _, _ in self.fetches.unfinished(cfg)])

    async def step(self, cfg: CrawlerConfig) -> str:
        """Merge what finished, resume or generate what is due; returns busy, wait, idle, failed or stopped."""
        self.wake.looking()
        while self.fetches.finished:
            if not await self.merger.merge(self.fetches.finished.popleft()):
                self._look_back = True
                return "failed"
        if self.stop.is_set():
            return "stopped"
        unmerged = self.fetches.unmerged
        if cfg.daemon.max_cycles and self.cycles + len(unmerged) >= cfg.daemon.max_cycles:
            return "wait" if unmerged else "busy"
        try:
            if self._look_back:
                self._look_back = False
                if await self.fetches.resume(cfg):
                    return "busy"
            return await self.next.generate(cfg)
        except CrawlerError as exc:
            self.log.error("cycle.failed", error=str(exc), phase=self.status.phase)
        except Exception as exc:  # noqa: BLE001 - a long-running service logs a bug and goes on
            self.log.exception("cycle.failed", error=repr(exc), phase=self.status.phase)
        self._look_back = True
        self.accounting.failed()
        return "failed"

    def reconfigure(self, reload: Reload) -> bool:
        """Hand new fetcher limits to the shared politeness and the running fetches; False when none runs."""
        return self.fetches.reconfigure(reload.config.fetcher)

    def cancel_fetches(self) -> None:
        self.fetches.cancel()

    async def _wait(self, cfg: CrawlerConfig) -> None:
        """Until something could change what generate finds, or a fetch ends; at most ``daemon.idle_sleep``.

        Once idle_sleep passes with nothing seen, the loop looks at what the watches might miss (a seed
        folder without change notifications, another command writing the webdb) before it sleeps again.
        """
        longest = cfg.daemon.idle_sleep
        hold = self.next.generate_after - time.monotonic()
        if self.running and self.wake.reasons and 0 < hold < longest:
            # A change came while generate was held back (at most half the time): look again when it may run.
            await self.wake.wait(self.stop, hold)
            return
        if await self.wake.wait(self.stop, longest) or self.stop.is_set():
            return
        reason = await asyncio.to_thread(self._changed_outside, cfg) if self.workspace.sees_changes else "idle_sleep"
        if reason is not None:
            self.wake.note(reason)
        elif not self.wake.reasons:
            self.wake.skip("idle_sleep")

    def _changed_outside(self, cfg: CrawlerConfig) -> str | None:
        """What changed that no watch reports: another command's webdb version, seeds on an unwatched folder.

        (Where the local tree does not show the stores, as staged by step, the loop generates once per idle_sleep.)
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

