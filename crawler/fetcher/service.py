"""Fetch one segment: fetchlist reader -> host queues -> workers -> parse -> segment writers.

One asyncio process (uvloop) per group of partitions. Every stage is joined by
a bounded queue, so memory stays flat however long the fetchlist is. A
partition is committed part by part; when every entry of it is recorded its
``_done-NNNNN`` marker is written, and when every partition is done the
outputs get ``_SUCCESS``. A fetch cut off (killed, or stopped through ``stop``)
is resumed by running it again: URLs already committed are skipped.

Nothing disappears silently: an entry that is not fetched (robots, a blocked
queue, the time limit) still gets a fetcher row with its reason, and
``fetch.done`` counts them by reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypedDict, Unpack

import pyarrow.parquet as pq
import structlog

from crawler.config import CrawlerConfig, FetcherConfig
from crawler.errors import FetchError, PluginNotFound
from crawler.fetcher.events import FetchObserver, NullObserver
from crawler.fetcher.follow import Follower
from crawler.fetcher.hostqueue import FetchQueues, HostQueue
from crawler.fetcher.known import load_known
from crawler.fetcher.outcome import retry_after_seconds, status_for_error
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.politeness import Politeness
from crawler.fetcher.politeness_file import politeness_path
from crawler.fetcher.progress import Counters, ProgressReporter, use_progress_bar
from crawler.fetcher.queuekey import queue_key_for
from crawler.fetcher.recorder import Recorder
from crawler.fetcher.records import fetch_row
from crawler.fetcher.redirects import HeldUrls, RedirectPolicy, listed_hashes, made_by_fetch
from crawler.fetcher.responses import Responses
from crawler.fetcher.resume import clear_leftovers, committed_urls
from crawler.fetcher.robots import Remembered, RobotsCache, RobotsRules, origin_of, robots_cache
from crawler.parsers.dispatch import ParserDispatch
from crawler.protocols.base import request_clock
from crawler.protocols.pool import ProtocolPool
from crawler.segments.layout import FETCH_OUTPUTS, Segment
from crawler.segments.writer import PartitionWriter
from crawler.statuses import FetchStatus

# Failures that say "this host is in trouble" (they count towards max_exceptions_per_queue).
_HOST_FAILURES = ("dns", "connect", "timeout", "tls")
_BACKOFF_STATUSES = (429, 503)


class Given(TypedDict, total=False):
    """What a fetch can be handed instead of making its own (each may be left out, or None)."""

    parse_pool: ParsePool | None  # parse processes: crawl starts one for each fetch, the daemon keeps one for its life
    politeness: Politeness | None  # the daemon's, shared by its fetches; else one kept in the crawl directory
    robots: RobotsCache | None  # the daemon's robots.txt cache, shared by its fetches; else one of this fetch's
    held: HeldUrls | None  # what the daemon's running fetches hold (fetchlists, redirect hops)
    robots_memory: Remembered | None  # crawl's settled robots.txt answers, carried from round to round
    start_pool: Callable[[], ParsePool] | None  # with no parse_pool: starts one, for a fetch grown large


def conditional_headers(entry: dict[str, Any]) -> dict[str, str]:
    headers = {}
    if entry.get("etag"):
        headers["If-None-Match"] = entry["etag"]
    modified = entry.get("modified_time")
    if modified is not None:
        headers["If-Modified-Since"] = modified.strftime("%a, %d %b %Y %H:%M:%S GMT")
    return headers


@dataclass(slots=True)
class _Ticket:
    started: bool = False  # the entry's request went out (a start of its queue)
    released: bool = False  # its queue was released when the response was in, before parsing


class _QueueClock:
    """A request's ``request_clock``: its send and its answer restamp its queue's start."""

    __slots__ = ("queues", "hq", "unanswered")

    def __init__(self, queues: FetchQueues, hq: HostQueue) -> None:
        self.queues, self.hq, self.unanswered = queues, hq, True

    def sent(self) -> None:
        self.queues.restamp(self.hq)

    def answered(self) -> None:
        if self.unanswered:  # once: at the answer's head, not again when the body is in
            self.unanswered = False
            self.queues.restamp(self.hq)


@dataclass(slots=True)
class FetchReport:
    """What a fetch did, from its ``Counters`` when it ended."""

    segment: str
    partitions: list[int]
    fetched: int = 0
    bytes: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> entries recorded without a fetch
    skipped: int = 0  # entries already recorded: committed by a cut-off run, or reached by a redirect
    elapsed: float = 0.0
    stopped: bool = False


class Fetcher:
    """One segment's fetch: the whole config builds what it works through; it keeps only sections of it."""

    def __init__(self, cfg: CrawlerConfig, segment: Segment, log: Any, *, stop: asyncio.Event | None = None,
                 observer: FetchObserver | None = None, **given: Unpack[Given]) -> None:
        self.fetcher_cfg = cfg.fetcher
        self.agent = cfg.http.agent_name
        self.request_timeout = cfg.http.timeout.total
        self.bar = use_progress_bar(cfg.log.format)
        self.load_known = partial(load_known, cfg)  # the webdb's URLs of the fetchlist's hosts (crawl_dir, jobs.*)
        self.stop = stop or asyncio.Event()
        self.observer = observer or NullObserver()
        self.segment = segment
        self.log = log.bind(segment=segment.name)
        self.protocols = ProtocolPool(cfg)
        self.protocol_for = self.protocols.protocol_for
        self.redirects = RedirectPolicy(cfg, given.get("held"), segment.name)  # held, robots: shared by the daemon
        # crawl's next round starts from this fetch's settled robots.txt answers (updated when it ends).
        self._robots_memory = given.get("robots_memory")
        robots = given.get("robots")
        self.robots = robots if robots is not None else robots_cache(
            cfg, self.protocol_for, self.log, filters=self.redirects.filters, normalize=self.redirects.normalize,
            remembered=self._robots_memory)
        parse_pool = given.get("parse_pool")
        self.parse_pool = parse_pool if cfg.fetcher.parse else None
        self.parsers = ParserDispatch(cfg) if cfg.fetcher.parse and parse_pool is None else None
        # A fetchlist too short for a pool can grow long as it follows outlinks: past this many rows, one starts.
        self._start_pool = given.get("start_pool") if self.parsers is not None else None
        self._pool_at = cfg.fetcher.parse_pool_min_entries
        self.queue_key = queue_key_for(cfg)
        self.writers: dict[int, PartitionWriter] = {}
        self.counters = Counters()
        self.report = FetchReport(self.segment.name, [])  # made from the counters when the run ends
        recorder = Recorder(self.writers, self.counters, self.observer, self.log)
        self._record, self._drop = recorder.record, recorder.drop  # per entry: bound once
        # A fetch of its own keeps its politeness in the crawl directory, so the next round, fetch or
        # restart waits what this one's last requests and Retry-Afters ask (the daemon passes its shared one).
        politeness = given.get("politeness")
        if politeness is None:
            politeness = Politeness(cfg.fetcher, state_file=politeness_path(cfg), log=self.log)
        workers = cfg.fetcher.concurrency
        self.queues = FetchQueues(cfg.fetcher, workers, max_queued=max(1000, workers * 20), made_here=made_by_fetch,
                                  on_drop=self._drop, politeness=politeness, log=self.log)
        self.follower = Follower(cfg, self.redirects, self.counters)
        responses = self._responses = Responses(self.redirects, self.parse_pool, self.parsers, self._record,
                                                self.queues, self.queue_key, self.follower, self.log)
        self._answer, self._keep = responses.answer, responses.keep  # per response: bound once
        self.expired = False  # fetcher.time_limit reached: the rest is recorded, not fetched
        self._committed: dict[int, set[str]] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._task_group: asyncio.TaskGroup | None = None

    def reconfigure(self, fetcher_cfg: FetcherConfig) -> None:
        """Apply concurrency, per-host concurrency and delays live (the daemon calls this on SIGHUP)."""
        old = self.fetcher_cfg.concurrency
        self.fetcher_cfg = fetcher_cfg
        self.queues.reconfigure(fetcher_cfg)
        change = fetcher_cfg.concurrency - old
        if change > 0 and self._task_group is not None:
            self.queues.add_workers(change)
            self._workers += [self._task_group.create_task(self._work(len(self._workers) + i))
                              for i in range(change)]
        elif change < 0 and self._task_group is not None:
            self._task_group.create_task(self.queues.remove_workers(-change))
        self.log.info("fetch.reconfigured", concurrency=fetcher_cfg.concurrency,
                      per_host_concurrency=fetcher_cfg.per_host_concurrency, min_delay=fetcher_cfg.min_delay)

    def _prepare(self, partitions: list[int] | None) -> tuple[list[int], list[int]]:
        available = self.segment.fetchlist_partitions()
        wanted = [p for p in (available if partitions is None else partitions) if p in available]
        todo = [p for p in wanted if not self.segment.partition_fetched(p)]
        for output in FETCH_OUTPUTS:
            self.segment.dir(output).mkdir(parents=True, exist_ok=True)
        for partition in todo:
            removed = clear_leftovers(self.segment, partition)
            committed = committed_urls(self.segment, partition)
            if committed or removed:
                self.log.info("fetch.resume", partition=partition, committed=len(committed), removed=removed)
            self._committed[partition] = committed
            self.writers[partition] = PartitionWriter(
                self.segment, partition, self.fetcher_cfg.commit_records, self.fetcher_cfg.commit_interval,
                commit_bytes=self.fetcher_cfg.commit_bytes,
            )
        return available, todo

    async def run(self, partitions: list[int] | None = None) -> FetchReport:
        started = time.monotonic()
        available, todo = self._prepare(partitions)
        # Off the loop: a daemon may run this beside another fetch on the same loop.
        known = await asyncio.to_thread(
            self.load_known, [self._fetchlist(p) for p in todo], self.log, every=self.follower.on)
        self.redirects.known = known.not_due
        self.follower.every, self.follower.traps = known.every, known.traps
        self.redirects.committed = listed_hashes(url for urls in self._committed.values() for url in urls)
        total = sum(pq.ParquetFile(self._fetchlist(p)).metadata.num_rows for p in todo)
        total -= sum(len(c) for c in self._committed.values())
        self.log.info("fetch.start", partitions=todo, entries=total,
                      skipped=[p for p in available if p not in todo and (partitions is None or p in partitions)])
        # The watchdog: fetcher.watchdog_after, or by default twice the whole-request timeout plus 5 s.
        stuck_after = self.fetcher_cfg.watchdog_after or 2 * self.request_timeout + 5
        reporter = ProgressReporter(
            self.segment.name, self.counters, self.queues.figures,
            interval=self.fetcher_cfg.progress_interval, stuck_after=stuck_after,
            total=max(total, 0), log=self.log, observer=self.observer, bar=self.bar,
        )
        try:
            async with self.queues.keeping(), asyncio.TaskGroup() as tg:
                self._task_group = tg
                tg.create_task(self._read(todo))
                dispatcher = tg.create_task(self.queues.dispatch())
                self._workers = [tg.create_task(self._work(i)) for i in range(self.fetcher_cfg.concurrency)]
                helpers = [tg.create_task(reporter.run()), tg.create_task(self._watch_stop())]
                if self.fetcher_cfg.time_limit > 0:
                    helpers.append(tg.create_task(self._time_limit(self.fetcher_cfg.time_limit)))
                await dispatcher
                while self._workers:  # reconfigure may add workers while we wait
                    await self._workers.pop()
                for helper in helpers:
                    helper.cancel()
        finally:
            self._task_group = None
            self.queues.close()
            if self._robots_memory is not None:
                self._robots_memory.clear()
                self._robots_memory.update(self.robots.settled())
            await self.protocols.aclose()
            await self.queue_key.aclose()
        for writer in self.writers.values():
            await writer.commit()
        counted = self.counters
        self.report = FetchReport(self.segment.name, todo, counted.fetched, counted.bytes, counted.by_status,
                                  counted.dropped, counted.skipped, elapsed=time.monotonic() - started)
        if self.stop.is_set():
            # Entries never fetched stay in the fetchlist: the partition is not done, a rerun resumes it.
            self.report.stopped = True
            self.log.info("fetch.stopped", fetched=self.report.fetched, dropped=self.report.dropped)
            return self.report
        for partition in self.writers:
            self.segment.mark_partition_fetched(partition)
        if all(self.segment.partition_fetched(p) for p in available):
            for output in FETCH_OUTPUTS:
                self.segment.mark_done(output)
        self.log.info("fetch.done", fetched=self.report.fetched, bytes=self.report.bytes,
                      by_status=self.report.by_status, dropped=self.report.dropped, skipped=self.report.skipped,
                      followed=counted.followed, follow_skipped=counted.follow_skipped,
                      errors=dict(self.counters.errors), elapsed_s=round(self.report.elapsed, 3))
        return self.report

    def _fetchlist(self, partition: int) -> Any:
        return self.segment.fetchlist_part(partition)

    async def _read(self, partitions: list[int]) -> None:
        try:
            for partition in partitions:
                committed = self._committed.pop(partition, set())
                reader = pq.ParquetFile(self._fetchlist(partition))
                for batch in reader.iter_batches(batch_size=1000):
                    for entry in batch.to_pylist():
                        if self.stop.is_set():
                            return
                        if entry["url"] in committed:
                            self.counters.skipped += 1
                            continue
                        if self.expired:
                            self._drop(entry, "time_limit")
                            continue
                        await self.queues.put(await self.queue_key.key(entry["host"]), entry)
                if self.counters.skipped:
                    self.log.info("fetch.skipped_committed", partition=partition, entries=self.counters.skipped)
        finally:
            self.queues.finish_feeding()

    async def _watch_stop(self) -> None:
        await self.stop.wait()
        self.queues.finish_feeding()
        self.queues.drop_all()

    async def _time_limit(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.expired = True
        self.log.warning("fetch.time_limit", seconds=seconds, queued=self.queues.queued)
        for entry in self.queues.drop_all():
            self._drop(entry, "time_limit")

    async def _work(self, worker: int) -> None:
        while True:
            item = await self.queues.ready.get()
            if item is None:
                return
            hq, entry = item
            self.counters.in_flight[worker] = (entry["url"], time.monotonic())
            # Set and reset the one context variable (bound_contextvars copies the whole context twice).
            tokens = structlog.contextvars.bind_contextvars(url=entry["url"])
            ticket = _Ticket()
            try:
                await self._process(hq, entry, ticket)
            except Exception as exc:  # noqa: BLE001 - one URL's bug must never stop the others
                self.log.exception("fetch.bug", url=entry["url"], error=repr(exc))
                self._record(entry, fetch_row(entry, FetchStatus.FAILED, reason=f"internal error: {exc!r}"))
            finally:
                structlog.contextvars.reset_contextvars(**tokens)
                self.counters.in_flight.pop(worker, None)
                if ticket.released:
                    self.queues.release_worker()
                else:
                    self.queues.release(hq, ticket.started)
            if self._start_pool is not None and self.counters.fetched >= self._pool_at:
                self._start_pool = self._responses.use_pool(self._start_pool, self.counters)
            await self.writers[entry["partition"]].commit_if_due()

    async def _process(self, hq: HostQueue, entry: dict[str, Any], ticket: _Ticket) -> None:
        url = entry["url"]
        if self.expired:
            self._drop(entry, "time_limit")
            return
        holder = self.redirects.held_elsewhere(entry)
        if holder is not None:
            # Fetched as a hop by another segment of this daemon; its row there decides the page at updatedb.
            self.counters.skipped += 1
            self.log.info("fetch.held_elsewhere", url=url, held_by=holder)
            return
        if not self.redirects.take(entry):
            self.counters.skipped += 1  # its row was written when a redirect reached it
            return
        try:
            protocol = self.protocol_for(url)
        except PluginNotFound:
            self._record(entry, fetch_row(entry, FetchStatus.FAILED, reason="unsupported_scheme"))
            return
        origin = origin_of(url)
        rules = await self.robots.rules_for(url, origin)
        if not self._robots_allow(hq, entry, origin, rules):
            return
        if not self.queues.may_start(hq):
            # The wait grew since dispatch (robots.txt just went out, or gave a Crawl-delay): back in the
            # host queue rather than in this worker, so other hosts keep going.
            if not self.stop.is_set():  # once stopped, an unfetched entry stays in the fetchlist
                self.queues.requeue(hq, entry)
            return
        self.queues.start(hq)
        ticket.started = True
        clock = _QueueClock(self.queues, hq)
        ready = request_clock.set(clock)  # the start the server sees
        try:
            response = await protocol.fetch(url, conditional_headers(entry))
        except FetchError as exc:
            self.counters.errors[exc.kind] = self.counters.errors.get(exc.kind, 0) + 1
            self.log.info("fetch.error", kind=exc.kind, error=str(exc))
            self._record(entry, fetch_row(entry, status_for_error(exc.kind), reason=f"{exc.kind}: {exc}"),
                         error_kind=exc.kind)
            if exc.kind in _HOST_FAILURES:
                self.queues.failed(hq, exc.kind)
            return
        finally:
            request_clock.reset(ready)
            clock.answered()  # a failure, or a protocol that does not call it, is over now
        if response.status in _BACKOFF_STATUSES:
            kind = f"http_{response.status}"
            self.counters.errors[kind] = self.counters.errors.get(kind, 0) + 1
            self.queues.adapt(hq, response.elapsed)
            self.queues.slow_down(hq, kind, retry_after_seconds(response.header("Retry-After")))
        else:
            self.queues.answered(hq, response.elapsed)
        row = await self._answer(entry, response)
        # The server is done with this request: the host's next one need not wait for the parse.
        ticket.released = True
        self.queues.release_queue(hq, True)
        await self._keep(entry, response, rules, row, hq.key)

    def _robots_allow(self, hq: HostQueue, entry: dict[str, Any], origin: str, rules: RobotsRules) -> bool:
        """Apply the entry's origin's robots.txt to it and to its queue; False if it is not to be fetched.

        robots.txt is per origin (RFC 9309 2.3): an origin's outcome decides for its own URLs only, even
        when several origins share one politeness queue; the queue waits the largest of their delays.
        """
        if rules.requested_at is not None:
            self.queues.note_start(hq, rules.requested_at)  # robots.txt was a request start of this queue
        if rules.unavailable:
            # Disallow all until a later round; waiting out the delay for each entry would gain nothing.
            if rules.error_kind is not None:
                # The origin's one failure (tls, connect, ...) counts once, with its kind, in the metrics.
                self.counters.errors[rules.error_kind] = self.counters.errors.get(rules.error_kind, 0) + 1
            self._drop(entry, rules.reason, error_kind=rules.error_kind)
            self.queues.block_origin(hq, origin, rules.reason)
            if rules.retry_after is not None:
                self.queues.retry_after(hq, rules.retry_after)
            return False
        delay = rules.crawl_delay(self.agent)
        if delay is not None and delay > self.fetcher_cfg.max_crawl_delay:
            self.log.warning("robots.crawl_delay_over_cap", host=hq.key, origin=origin, crawl_delay=delay)
            self._drop(entry, "crawl_delay_over_cap")
            self.queues.block_origin(hq, origin, "crawl_delay_over_cap")
            return False
        self.queues.set_crawl_delay(hq, delay, origin)
        if not rules.allowed(entry["url"], self.agent):
            self.log.debug("robots.denied")
            self._record(entry, fetch_row(entry, FetchStatus.ROBOTS_DENIED, reason="robots.txt"))
            return False
        return True


async def fetch_segment(cfg: CrawlerConfig, segment: Segment, log: Any, partitions: list[int] | None = None,
                        *, stop: asyncio.Event | None = None, observer: FetchObserver | None = None,
                        parse_pool: ParsePool | None = None, robots_memory: Remembered | None = None,
                        start_pool: Callable[[], ParsePool] | None = None) -> FetchReport:
    return await Fetcher(cfg, segment, log, stop=stop, observer=observer, parse_pool=parse_pool,
                         robots_memory=robots_memory, start_pool=start_pool).run(partitions)
