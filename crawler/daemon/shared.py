"""What the daemon's concurrent fetches share: politeness, robots.txt rules, and the URLs they hold.

The daemon fetches several segments at once in one process (no idle tail).
Each ``Fetcher`` still owns its queues, writers and HTTP session, and closes
them when its segment is done; what must hold across segments lives here, for
the daemon's whole life:

- ``Politeness``: one request cap, per-host in-flight counts, request starts, delays and holds.
- one ``RobotsCache`` (bounded, ``robots.cache_ttl`` as for one fetch), so a
  host's robots.txt is requested once per TTL, not once per segment. It fetches
  through protocols of its own (``ProtocolPool``), never through a fetch's
  session, which may be closed while a robots.txt request is still waited on.
- ``HeldUrls``: each running segment's fetchlist and the redirect targets it
  took, until it is merged and no fetch that started before the merge is left,
  so no URL is fetched by two segments.

The protocols and the robots cache are built from the config at start: a
SIGHUP's new ``http.*`` values reach each new fetch, not robots.txt requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq

from crawler.config import CrawlerConfig
from crawler.fetcher.known import KnownFetched
from crawler.fetcher.politeness import Politeness
from crawler.fetcher.politeness_file import politeness_path
from crawler.fetcher.redirects import HeldUrls, listed_hashes
from crawler.fetcher.robots import robots_cache
from crawler.protocols.pool import ProtocolPool
from crawler.segments.layout import Segment


def fetchlist_urls(segment: Segment) -> Iterator[str]:
    for part in segment.parts("fetchlist"):
        for batch in pq.ParquetFile(part).iter_batches(columns=["url"], batch_size=65_536):
            yield from batch.column(0).to_pylist()


class FetchShared:
    def __init__(self, cfg: CrawlerConfig, log: Any) -> None:
        # Kept in the crawl directory too, so a restarted daemon waits what its last requests ask.
        self.politeness = Politeness(cfg.fetcher, state_file=politeness_path(cfg), log=log)
        self.held = HeldUrls()
        self._fetching: set[str] = set()  # segments whose fetch runs
        self._merged: list[tuple[str, set[str]]] = []  # merged, still held for the fetches that started before
        self.protocols = ProtocolPool(cfg)
        self.robots = robots_cache(cfg, self.protocols.protocol_for, log)  # as a fetch's own cache is made

    def fetcher_kwargs(self) -> dict[str, Any]:
        return {"politeness": self.politeness, "robots": self.robots, "held": self.held}

    def segment_starts(self, segment: Segment, listed: KnownFetched, *, fetching: bool = True) -> None:
        """Hold its fetchlist; robots.txt a host could not give is asked for again, as a fresh cache per segment did.

        ``fetching``: False for a segment an earlier run fetched, which is only merged.
        """
        self.held.list_segment(segment.name, listed)
        if fetching:
            self._fetching.add(segment.name)
        self.robots.forget_unavailable()

    def segment_ended(self, segment: Segment) -> None:
        self._fetching.discard(segment.name)
        self._release()

    def segment_merged(self, segment: Segment) -> None:
        """Stop holding its URLs once no fetch is left that read the webdb before this merge.

        A fetch loads the webdb's fetched URLs when it starts (crawler/fetcher/known.py), so until it ends
        only this hold keeps it from following a hop to a page the merged segment fetched.
        """
        self._merged.append((segment.name, self._fetching - {segment.name}))
        self._release()

    def _release(self) -> None:
        waiting = []
        for name, readers in self._merged:
            readers &= self._fetching
            if readers:
                waiting.append((name, readers))
            else:
                self.held.forget(name)
        self._merged = waiting

    async def aclose(self) -> None:
        await self.protocols.aclose()


def fetchlist_hashes(segment: Segment) -> KnownFetched:
    """``segment``'s fetchlist URLs as hashes (blocking: run it in a thread)."""
    return listed_hashes(fetchlist_urls(segment))
