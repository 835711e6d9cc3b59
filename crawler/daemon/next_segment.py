"""When and what the daemon generates next: seeds first, then a segment, overlapping the fetches that still run.

No idle tail: whenever the hosts the running fetches still hold cannot keep
every worker busy (``overlap.in_tail``), another segment is generated without
those hosts, and without the redirect targets the running segments took, and
started beside them. Generate runs only when something changed what it would
find (wake.py), and while fetches run at most half the time: on a large webdb
one generate takes a while.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from crawler.config import CrawlerConfig
from crawler.daemon.accounting import Accounting
from crawler.daemon.fetches import Fetches
from crawler.daemon.outlook import webdb_outlook
from crawler.daemon.overlap import in_tail
from crawler.daemon.seeds import STATE_FILE, SeedWatcher
from crawler.daemon.wake import UNKNOWN, Outlook, Wake, utc_now
from crawler.errors import CrawlerError
from crawler.jobs.generate import generate
from crawler.metrics import Metrics
from crawler.storage.access import Access
from crawler.storage.workspace import GenerateArgs, NoArgs, Workspace
from crawler.webdb.store import VersionedStore

# Seed files are injected as inject is, and the seed memory goes with them (pulled before, published after).
SEEDS = Access(writes=("webdb",), engine_io=True, files=(STATE_FILE,))


class NextSegment:
    def __init__(self, workspace: Workspace, fetches: Fetches, seeds: SeedWatcher, wake: Wake,
                 accounting: Accounting, metrics: Metrics, stop: asyncio.Event, log: Any) -> None:
        self.workspace = workspace
        self.fetches = fetches
        self.seeds = seeds
        self.wake = wake
        self.accounting = accounting
        self.metrics = metrics
        self.stop = stop
        self.log = log
        # While fetches run, generate at most half the time: on a large webdb one generate takes a while.
        self.generate_after = 0.0

    async def generate(self, cfg: CrawlerConfig) -> str:
        """Inject new seeds and start the next segment's fetch if anything is due; busy, wait, idle or stopped."""
        running, unmerged = self.fetches.running, self.fetches.unmerged
        waiting = "wait" if unmerged else "idle"
        if not self.wake.reasons:
            return waiting  # nothing changed: generate would find what it found last time
        trackers = self.fetches.trackers()
        if running and not (cfg.daemon.overlap and in_tail(trackers, cfg.fetcher)
                            and time.monotonic() >= self.generate_after):
            return "wait"
        reasons, skipped = self.wake.take()
        phases: dict[str, float] = {}
        injected = await self.accounting.phase("inject", phases, self._inject_seeds, cfg)
        self.metrics.phase_seconds.labels("inject").observe(phases["inject"])
        if not injected and reasons == {"seeds"}:  # a folder event with no new content (a deletion, a touch)
            self.wake.skipped.update(skipped)
            self.wake.skip("seeds")
            return waiting
        self.log.info("daemon.wake", reasons=sorted(reasons), skipped=dict(skipped), seeds_injected=injected)
        busy: set[str] = set().union(*(t.busy_hosts() for t in trackers))
        t0 = time.monotonic()
        # Redirect targets the running segments took are fetched there: not again in this one.
        report, outlook = await self.accounting.phase("generate", phases, self._generate_job, cfg, busy,
                                                      self.fetches.shared.held.hop_targets())
        self.generate_after = time.monotonic() + phases["generate"]
        self.wake.generated(outlook)
        if report is None:
            if unmerged:
                return "wait"
            self.log.info("daemon.idle", reason=f"no crawl database yet: drop seed files into {cfg.daemon.seeds}",
                          sleep_s=cfg.daemon.idle_sleep)
            return "idle"
        self.metrics.generate_runs.labels("segment" if report.segment else "nothing").inc()
        if report.segment is None:
            if unmerged:  # fetching, or fetched (maybe during this generate) and about to be merged
                self.log.debug("daemon.overlap_skipped", reason="nothing due outside the busy hosts",
                               busy_hosts=len(busy), waiting_hosts=len(outlook.waiting or ()),
                               fetching=sorted(running))
                return "wait"
            sleep = self.wake.until_deadline()
            self.log.info("daemon.idle", reason="nothing due", next_due=_iso(outlook.next_due),
                          sleep_s=round(min(cfg.daemon.idle_sleep, sleep if sleep is not None else float("inf")), 3))
            return "idle"
        if self.stop.is_set():
            return "stopped"  # the segment stays generated; the next run fetches it first
        if running:
            self.log.info("daemon.overlap", next_segment=report.segment.name, selected=report.selected,
                          busy_hosts=len(busy), fetching=sorted(running))
        fetch = await self.fetches.start(report.segment.name, selected=report.selected)
        fetch.generate_seconds = time.monotonic() - t0
        return "busy"

    def _inject_seeds(self, cfg: CrawlerConfig) -> list[str]:
        if not self.seeds.has_new(cfg, self.log):  # staged by step, a lease and a pull per generate otherwise
            return []
        with self.workspace.step(cfg, SEEDS, NoArgs()) as run:
            return self.seeds.inject_new(run.cfg, self.log)

    def _generate_job(self, cfg: CrawlerConfig, busy: set[str], hops: set[str]) -> tuple[Any, Outlook]:
        """generate's report (None while there is no crawl database yet), and what may change its answer."""
        with self.workspace.step(cfg, "generate", GenerateArgs()) as run:
            if VersionedStore(run.cfg.crawl_path / "webdb").current() is None:
                return None, UNKNOWN
            now = utc_now()
            report = generate(run.cfg, self.log, now, exclude_hosts=busy or None, exclude_urls=hops or None)
            try:
                return report, webdb_outlook(run.cfg, now, busy, hops, report.segment)
            except CrawlerError as exc:  # a hint only: without it, every wake-up may change the answer
                self.log.warning("daemon.outlook_failed", error=str(exc),
                                 fallback="generate runs on every host freed and every daemon.idle_sleep")
                return report, UNKNOWN


def _iso(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None
