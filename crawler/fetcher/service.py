"""Fetch one segment: fetchlist reader -> host queues -> workers -> parse -> segment writers.

One asyncio process (uvloop). Every stage is joined by a bounded queue, so
memory stays flat however long the fetchlist is. A partition is committed
part by part; when all its entries are written its ``_done-NNNNN`` marker is
written, and when every partition is done the outputs get ``_SUCCESS``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq
import structlog

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError, FetchError, PluginNotFound
from crawler.fetcher.events import FetchDone, FetchObserver, FetchProgress, NullObserver
from crawler.fetcher.hostqueue import FetchQueues, HostQueue
from crawler.fetcher.outcome import status_for_error, status_for_http
from crawler.fetcher.records import fetch_row, parse_rows
from crawler.fetcher.robots import RobotsCache
from crawler.fsutil import atomic_write_text, remove_tree
from crawler.models import FetchStatus
from crawler.parsers.dispatch import ParserDispatch
from crawler.protocols.base import PROTOCOLS, Protocol, Response
from crawler.segments.layout import Segment
from crawler.segments.writer import PartitionWriter
from crawler.urls.normalize import InvalidUrl, normalize

OUTPUTS = ("fetcher", "content", "parse_text", "parse_data")
PROGRESS_EVERY = 10.0


@dataclass(slots=True)
class FetchReport:
    segment: str
    partitions: list[int]
    fetched: int = 0
    bytes: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    elapsed: float = 0.0


def fetchlist_partitions(segment: Segment) -> list[int]:
    return sorted(int(p.stem.split("-")[1]) for p in segment.parts("fetchlist"))


def done_marker(segment: Segment, partition: int) -> Any:
    return segment.dir("fetcher") / f"_done-{partition:05d}"


def reset_partition(segment: Segment, partition: int) -> None:
    """Drop the parts of a cut-off fetch of this partition, so it is redone whole."""
    prefix = f"part-{partition:05d}-"
    for output in OUTPUTS:
        folder = segment.dir(output)
        if folder.is_dir():
            for path in folder.iterdir():
                if path.name.startswith(prefix) or path.name.startswith(".tmp-"):
                    remove_tree(path)


class Fetcher:
    def __init__(self, cfg: CrawlerConfig, segment: Segment, log: Any, *,
                 stop: asyncio.Event | None = None, observer: FetchObserver | None = None) -> None:
        self.cfg = cfg
        self.stop = stop or asyncio.Event()
        self.observer = observer or NullObserver()
        self.segment = segment
        self.log = log.bind(segment=segment.name)
        self.protocols: dict[str, Protocol] = {}
        self.robots = RobotsCache(self.protocol_for)
        self.parsers = ParserDispatch(cfg) if cfg.fetcher.parse else None
        workers = cfg.fetcher.concurrency
        self.queues = FetchQueues(cfg.fetcher, workers, max_queued=max(1000, workers * 20))
        self.writers: dict[int, PartitionWriter] = {}
        self.report = FetchReport(segment.name, [])
        self.agent = cfg.http.agent_name

    def protocol_for(self, url: str) -> Protocol:
        scheme = url.split(":", 1)[0].lower()
        protocol = self.protocols.get(scheme)
        if protocol is None:
            factory = PROTOCOLS.load(scheme)
            # One instance per plugin class, so http and https share a connection pool.
            for existing_scheme, existing in self.protocols.items():
                if PROTOCOLS.load(existing_scheme) is factory:
                    protocol = existing
                    break
            else:
                protocol = factory(self.cfg)
            self.protocols[scheme] = protocol
        return protocol

    async def run(self, partitions: list[int] | None = None) -> FetchReport:
        started = time.monotonic()
        available = fetchlist_partitions(self.segment)
        wanted = [p for p in (available if partitions is None else partitions) if p in available]
        todo = [p for p in wanted if not done_marker(self.segment, p).exists()]
        self.report.partitions = todo
        for output in OUTPUTS:
            self.segment.dir(output).mkdir(parents=True, exist_ok=True)
        for partition in todo:
            reset_partition(self.segment, partition)
            self.writers[partition] = PartitionWriter(
                self.segment, partition, self.cfg.fetcher.commit_records, self.cfg.fetcher.commit_interval
            )
        self.log.info("fetch.start", partitions=todo, skipped=[p for p in wanted if p not in todo])
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._read(todo))
                dispatcher = tg.create_task(self.queues.dispatch())
                workers = [tg.create_task(self._work()) for _ in range(self.cfg.fetcher.concurrency)]
                progress = tg.create_task(self._progress(started))
                watcher = tg.create_task(self._watch_stop())
                await dispatcher
                await asyncio.gather(*workers)
                progress.cancel()
                watcher.cancel()
        finally:
            for protocol in set(self.protocols.values()):
                await protocol.aclose()
        for writer in self.writers.values():
            await writer.commit()
        if self.stop.is_set():
            # Entries never fetched stay in the fetchlist: the partition is not done, a rerun resumes it.
            self.log.info("fetch.stopped", fetched=self.report.fetched)
            self.report.elapsed = time.monotonic() - started
            return self.report
        for partition in self.writers:
            atomic_write_text(done_marker(self.segment, partition), "")
        if all(done_marker(self.segment, p).exists() for p in available):
            for output in OUTPUTS:
                self.segment.mark_done(output)
        self.report.elapsed = time.monotonic() - started
        self.log.info("fetch.done", fetched=self.report.fetched, bytes=self.report.bytes,
                      by_status=self.report.by_status, elapsed_s=round(self.report.elapsed, 3))
        return self.report

    async def _read(self, partitions: list[int]) -> None:
        try:
            for partition in partitions:
                path = self.segment.dir("fetchlist") / f"part-{partition:05d}.parquet"
                reader = pq.ParquetFile(path)
                for batch in reader.iter_batches(batch_size=1000):
                    for entry in batch.to_pylist():
                        if self.stop.is_set():
                            return
                        await self.queues.put(self._queue_key(entry), entry)
        finally:
            self.queues.finish_feeding()

    async def _watch_stop(self) -> None:
        await self.stop.wait()
        self.queues.finish_feeding()
        for hq in list(self.queues.hosts.values()):
            self.queues.drop_host(hq)

    def _queue_key(self, entry: dict[str, Any]) -> str:
        # queue_mode ip/domain arrive with "Fetcher in depth"; until then every mode queues by host.
        return entry["host"]

    async def _progress(self, started: float) -> None:
        last_count, last_bytes, last_time = 0, 0, started
        while True:
            await asyncio.sleep(PROGRESS_EVERY)
            now = time.monotonic()
            span = max(now - last_time, 1e-9)
            event = FetchProgress(
                segment=self.segment.name,
                pages_per_second=round((self.report.fetched - last_count) / span, 2),
                bytes_per_second=round((self.report.bytes - last_bytes) / span),
                in_flight=self.queues.in_flight,
                queued=self.queues.queued,
                active_hosts=len(self.queues.hosts),
                fetched=self.report.fetched,
            )
            self.observer.progress(event)
            self.log.info("fetch.progress", pages_per_second=event.pages_per_second,
                          bytes_per_second=event.bytes_per_second, in_flight=event.in_flight,
                          queued=event.queued, active_hosts=event.active_hosts, fetched=event.fetched)
            last_count, last_bytes, last_time = self.report.fetched, self.report.bytes, now

    async def _work(self) -> None:
        while True:
            item = await self.queues.ready.get()
            if item is None:
                return
            hq, entry = item
            try:
                with structlog.contextvars.bound_contextvars(url=entry["url"]):
                    await self._process(hq, entry)
            except Exception as exc:  # noqa: BLE001 - one URL's bug must never stop the others
                self.log.exception("fetch.bug", url=entry["url"], error=repr(exc))
                self._record(entry, fetch_row(entry, FetchStatus.FAILED, reason=f"internal error: {exc!r}"))
            finally:
                self.queues.release(hq)
            writer = self.writers[entry["partition"]]
            if writer.due():
                await writer.commit()

    async def _process(self, hq: HostQueue, entry: dict[str, Any]) -> None:
        url = entry["url"]
        try:
            protocol = self.protocol_for(url)
        except PluginNotFound:
            self._record(entry, fetch_row(entry, FetchStatus.FAILED, reason="unsupported_scheme"))
            return
        rules = await self.robots.rules_for(url)
        if not hq.robots_checked:
            hq.robots_checked = True
            delay = rules.crawl_delay(self.agent)
            if delay is not None and delay > self.cfg.fetcher.max_crawl_delay:
                self.log.warning("robots.crawl_delay_over_cap", host=hq.key, crawl_delay=delay)
                for dropped in [entry, *self.queues.drop_host(hq)]:
                    self._record(dropped, fetch_row(dropped, FetchStatus.RETRY, reason="crawl_delay_over_cap"))
                return
            if delay is not None:
                self.queues.set_delay(hq, delay)
        if rules.unavailable:
            self._record(entry, fetch_row(entry, FetchStatus.RETRY, reason=rules.reason))
            return
        if not rules.allowed(url, self.agent):
            self.log.debug("robots.denied")
            self._record(entry, fetch_row(entry, FetchStatus.ROBOTS_DENIED, reason="robots.txt"))
            return
        try:
            response = await protocol.fetch(url, self._conditional_headers(entry))
        except FetchError as exc:
            self.log.info("fetch.error", kind=exc.kind, error=str(exc))
            self._record(entry, fetch_row(entry, status_for_error(exc.kind), reason=f"{exc.kind}: {exc}"))
            return
        self._record_response(entry, response)

    def _conditional_headers(self, entry: dict[str, Any]) -> dict[str, str]:
        headers = {}
        if entry.get("etag"):
            headers["If-None-Match"] = entry["etag"]
        modified = entry.get("modified_time")
        if modified is not None:
            headers["If-Modified-Since"] = modified.strftime("%a, %d %b %Y %H:%M:%S GMT")
        return headers

    def _record_response(self, entry: dict[str, Any], response: Response) -> None:
        location = response.header("Location")
        status = status_for_http(response.status, bool(location))
        redirect = None
        reason = f"{response.status} {response.reason}".strip()
        if status in (FetchStatus.REDIRECT_PERM, FetchStatus.REDIRECT_TEMP):
            try:
                redirect = normalize(location or "", base=entry["url"])
            except InvalidUrl as exc:
                status, reason = FetchStatus.GONE, f"redirect to an invalid URL: {exc}"
        row = fetch_row(entry, status, reason=reason, response=response, redirect_url=redirect)
        parse_text = parse_data = None
        if status == FetchStatus.SUCCESS and self.parsers is not None:
            try:
                parsed = self.parsers.parse(response.body, entry["url"], response.header("Content-Type"))
            except CrawlerError as exc:
                self.log.warning("parse.error", error=str(exc))
            else:
                parse_text, parse_data = parse_rows(entry["url"], parsed)
        self._record(entry, row, response, parse_text, parse_data)

    def _record(self, entry: dict[str, Any], row: dict[str, Any], response: Response | None = None,
                parse_text: dict[str, Any] | None = None, parse_data: dict[str, Any] | None = None) -> None:
        self.writers[entry["partition"]].add(row, response, parse_text, parse_data)
        self.report.fetched += 1
        self.report.by_status[row["status"]] = self.report.by_status.get(row["status"], 0) + 1
        nbytes = len(response.raw_body) if response is not None else 0
        self.report.bytes += nbytes
        reason = row["reason"] or ""
        self.observer.fetch_done(FetchDone(
            url=row["url"], host=row["host"], status=row["status"], http_status=row["http_status"],
            error_kind=reason.split(":", 1)[0] if response is None and ":" in reason else None,
            bytes=nbytes, elapsed=(row["elapsed_ms"] or 0) / 1000,
        ))
        self.log.debug("fetch.done", status=row["status"], http_status=row["http_status"],
                       elapsed_ms=row["elapsed_ms"])


async def fetch_segment(cfg: CrawlerConfig, segment: Segment, log: Any, partitions: list[int] | None = None,
                        *, stop: asyncio.Event | None = None,
                        observer: FetchObserver | None = None) -> FetchReport:
    return await Fetcher(cfg, segment, log, stop=stop, observer=observer).run(partitions)
