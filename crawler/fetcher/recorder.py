"""Where every entry of a fetch ends: one row in its partition's writer, counted once, told to the observer.

Fetched or not (robots.txt, a blocked queue, the time limit), an entry gets one
row, and ``Counters`` (crawler/fetcher/progress.py) is the one tally of them:
``fetch.progress`` reads it while the fetch runs, and the fetch's report is made
from it when it ends.
"""

from __future__ import annotations

import logging
from typing import Any

from crawler.fetcher.events import FetchDone, FetchObserver, NullObserver
from crawler.fetcher.progress import Counters
from crawler.fetcher.records import fetch_row
from crawler.protocols.base import Response
from crawler.segments.writer import PartitionWriter
from crawler.statuses import FetchStatus


class Recorder:
    def __init__(self, writers: dict[int, PartitionWriter], counters: Counters, observer: FetchObserver,
                 log: Any) -> None:
        self.writers = writers  # partition -> its writer (filled as the fetch opens its partitions)
        self.counters = counters
        self.observer = observer
        self._observed = not isinstance(observer, NullObserver)  # no event object per page for nobody
        self.log = log
        # The per-URL debug line's arguments cost more than the line when debug is off (a bound logger's
        # level is fixed when it is bound).
        is_enabled_for = getattr(log, "is_enabled_for", None)
        self._debug = is_enabled_for is None or is_enabled_for(logging.DEBUG)

    def drop(self, entry: dict[str, Any], reason: str, error_kind: str | None = None) -> None:
        """Record an entry that will not be fetched (retry later) with its reason."""
        if entry.get("follow_depth"):
            # A followed outlink not fetched (the time limit, a blocked queue) needs no row: its page's
            # outlinks hold it, and updatedb queues it for the next round as any new link.
            self.counters.follow_skipped[reason] = self.counters.follow_skipped.get(reason, 0) + 1
            return
        self.counters.dropped[reason] = self.counters.dropped.get(reason, 0) + 1
        self.record(entry, fetch_row(entry, FetchStatus.RETRY, reason=reason), error_kind=error_kind)

    def record(self, entry: dict[str, Any], row: dict[str, Any], response: Response | None = None,
               parse_text: dict[str, Any] | None = None, parse_data: dict[str, Any] | None = None,
               error_kind: str | None = None, archived: Response | bytes | None = None) -> None:
        """``archived``: the response's WARC records a parse process encoded (else the part encodes them)."""
        row["redirect_source"] = entry.get("redirect_source")
        row["redirect_hop"] = entry.get("redirect_hop")
        self.writers[entry["partition"]].add(row, response, parse_text, parse_data, archived)
        counters = self.counters
        counters.fetched += 1
        counters.by_status[row["status"]] = counters.by_status.get(row["status"], 0) + 1
        nbytes = len(response.raw_body) if response is not None else 0
        counters.bytes += nbytes
        if self._observed:
            self.observer.fetch_done(FetchDone(
                url=row["url"], host=row["host"], status=row["status"], http_status=row["http_status"],
                error_kind=error_kind, bytes=nbytes, elapsed=(row["elapsed_ms"] or 0) / 1000,
            ))
        if self._debug:
            self.log.debug("fetch.url", url=row["url"], host=row["host"], status=row["status"],
                           http_status=row["http_status"], bytes=nbytes, elapsed_ms=row["elapsed_ms"],
                           reason=row["reason"] or None)
