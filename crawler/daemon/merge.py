"""One daemon cycle's end: a finished fetch's segment merged (updatedb, invertlinks, dedup), pruned, published.

Each segment is merged as soon as its own fetch completes, whatever older
fetches still run: generate already leaves out the URLs of every unmerged
segment, so the order of merges does not matter. Each job is a step of the
workspace (crawler/storage/workspace.py), staged as its command when the crawl
goes by step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from structlog.contextvars import bound_contextvars

from crawler.config import CrawlerConfig
from crawler.daemon.accounting import Accounting
from crawler.daemon.fetches import Fetches, RunningFetch
from crawler.daemon.retention import prune_segments
from crawler.daemon.wake import Wake
from crawler.errors import CrawlerError, SegmentError
from crawler.jobs.dedup import dedup
from crawler.jobs.invertlinks import invertlinks, unlinked_segments
from crawler.jobs.readdb import webdb_figures
from crawler.jobs.updatedb import updatedb
from crawler.metrics import Metrics
from crawler.segments.layout import open_segment
from crawler.segments.listing import segments_dir
from crawler.storage.access import STATE
from crawler.storage.workspace import NoArgs, SegmentsArgs, Workspace
from crawler.webdb.store import VersionedStore


class Merger:
    def __init__(self, config: Callable[[], CrawlerConfig], workspace: Workspace, fetches: Fetches,
                 accounting: Accounting, metrics: Metrics, wake: Wake, stop: asyncio.Event, log: Any) -> None:
        self.config = config
        self.workspace = workspace
        self.fetches = fetches
        self.accounting = accounting
        self.metrics = metrics
        self.wake = wake
        self.stop = stop
        self.log = log

    async def merge(self, fetch: RunningFetch) -> bool:
        """One cycle's end: updatedb, invertlinks (dedup) and prune for a finished fetch; False if it failed."""
        self.fetches.unmerged.pop(fetch.segment.name, None)
        segment = fetch.segment
        phases: dict[str, float] = {}
        if fetch.generate_seconds is not None:
            phases["generate"] = fetch.generate_seconds
        if fetch.task is not None and fetch.ended is not None:
            phases["fetch"] = fetch.ended - fetch.started
        with bound_contextvars(cycle=fetch.number, segment=segment.name):
            try:
                report = None
                if fetch.task is not None:
                    if fetch.task.cancelled():
                        return True  # cut at shutdown: the next run resumes it
                    report = fetch.task.result()
                if not self.workspace.fetch_complete(segment, None if report is None else report.stopped):
                    if self.stop.is_set():
                        self.accounting.stopped(phases)
                        return True
                    raise SegmentError(f"{segment.path}: fetch did not complete")
                figures = await self._after_fetch(self.config(), segment.name, self.accounting.cycles + 1, phases)
            except CrawlerError as exc:
                self.log.error("cycle.failed", error=str(exc), phase=self.accounting.status.phase)
            except Exception as exc:  # noqa: BLE001 - a long-running service logs a bug and goes on
                self.log.exception("cycle.failed", error=repr(exc), phase=self.accounting.status.phase)
            else:
                self.wake.note("merged")
                self.fetches.shared.segment_merged(segment)
                self.accounting.done(fetch, phases, report, figures)
                return True
        self.accounting.failed(phases)
        return False

    async def _after_fetch(self, cfg: CrawlerConfig, name: str, number: int,
                           phases: dict[str, float]) -> dict[str, Any]:
        phase = self.accounting.phase
        update, merged = await phase("updatedb", phases, self._updatedb, cfg, name)
        self.metrics.outlinks_cut(update.over_cap)
        await phase("invertlinks", phases, self._invertlinks, cfg, name)
        if cfg.daemon.dedup_every and number % cfg.daemon.dedup_every == 0:
            await phase("dedup", phases, self._dedup, cfg)
        stats = await asyncio.to_thread(self._figures, cfg)
        self.metrics.webdb(stats["version"], stats["by_status"])
        await phase("prune", phases, prune_segments, segments_dir(cfg), merged,
                    cfg.daemon.keep_segments, cfg.daemon.archive_dir, self.log)
        await phase("publish", phases, self.workspace.end_round, cfg)  # a bucket gets each cycle
        await phase("prune", phases, self.workspace.prune, cfg, merged, self.log)
        return {"new_urls": update.new_urls, "version": update.version, "db_urls": stats["urls"],
                "merged_fetched": update.fetched}

    def _updatedb(self, cfg: CrawlerConfig, name: str) -> tuple[Any, list[str]]:
        """updatedb's report and the segments the new version has merged."""
        with self.workspace.step(cfg, "updatedb", SegmentsArgs([name])) as run:
            segment = open_segment(segments_dir(run.cfg) / name)
            # A fetch cut short (a partition leased elsewhere, a signal) must not be merged as if complete.
            if not segment.fetched:
                raise SegmentError(f"{segment.path}: fetch did not complete")
            report = updatedb(run.cfg, [segment], self.log)
            return report, VersionedStore(run.cfg.crawl_path / "webdb").require_current().merged_segments

    def _invertlinks(self, cfg: CrawlerConfig, name: str) -> None:
        # With any segment an earlier cycle merged into the webdb but was cut off before inverting.
        with self.workspace.step(cfg, STATE, NoArgs()) as state:
            names = [s.name for s in unlinked_segments(state.cfg)] or [name]
        with self.workspace.step(cfg, "invertlinks", SegmentsArgs(names)) as run:
            invertlinks(run.cfg, [open_segment(segments_dir(run.cfg) / n) for n in names], self.log)

    def _dedup(self, cfg: CrawlerConfig) -> Any:
        with self.workspace.step(cfg, "dedup", NoArgs()) as run:
            return dedup(run.cfg, self.log)

    def _figures(self, cfg: CrawlerConfig) -> dict[str, Any]:
        # Through the job engine: staged by step the webdb's parts stay in the bucket, where only it reads them.
        with self.workspace.step(cfg, STATE, NoArgs()) as state:
            return webdb_figures(state.cfg)
