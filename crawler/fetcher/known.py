"""URLs the webdb has as fetched and not yet due, so a redirect hop to one is not fetched again.

On a site that moved its pages, a third of a round's fetches can be hops to
pages fetched a round earlier (``/moved/N`` -> ``/p/N``). At fetch start one
DuckDB query over the live webdb version takes the URLs of the fetchlist's
hosts whose ``next_fetch`` is still ahead (any status but unfetched and
retry: a page fetched, not modified, gone, or itself a redirect), as the low
64 bits of their MD5, into one sorted ``array('Q')``: 8 bytes per URL, at most
``_MAX_KNOWN`` of them, whatever the fetchlist's length. A hop probes it with
a binary search.

Only the fetchlist's hosts are loaded, so a hop to another host is followed as
before. A hash collision (about one in 10^19 per probe) or a URL left out past
the cap only costs a fetch or a skipped hop whose target updatedb still knows:
nothing is lost either way, the source row records the target and the reason.
"""

from __future__ import annotations

import hashlib
from array import array
from bisect import bisect_left
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError
from crawler.jobs.engine import arrow_batches, connect, parquet_source, sql_literal, utc_naive
from crawler.models import FETCHLIST, PAGES, DbStatus
from crawler.webdb.store import VersionedStore

_MAX_KNOWN = 8_000_000  # 64 MB of hashes; past it a random share of the hosts' URLs is kept
_LOW64 = (1 << 64) - 1


def url_hash(url: str) -> int:
    """The low 64 bits of MD5(url), as DuckDB's ``md5_number(url) & (2^64 - 1)`` computes them."""
    return int.from_bytes(hashlib.md5(url.encode("utf-8", "surrogatepass")).digest()[:8], "little")


class KnownFetched:
    """Sorted URL hashes; ``in`` is a binary search."""

    def __init__(self, sorted_hashes: array | None = None) -> None:
        self.hashes = sorted_hashes if sorted_hashes is not None else array("Q")

    def __len__(self) -> int:
        return len(self.hashes)

    def __contains__(self, url: str) -> bool:
        if not self.hashes:
            return False
        h = url_hash(url)
        i = bisect_left(self.hashes, h)
        return i < len(self.hashes) and self.hashes[i] == h


def load_known_fetched(cfg: CrawlerConfig, fetchlists: list[Path], log: Any,
                       now: datetime | None = None) -> KnownFetched:
    """The not-due URLs of the hosts in ``fetchlists``, from the live webdb version; empty if there is none.

    Never fails a fetch: an unreadable webdb is logged and the fetch follows every hop as before.
    """
    if not fetchlists:
        return KnownFetched()
    try:
        version = VersionedStore(cfg.crawl_path / "webdb").current()
    except CrawlerError as exc:
        log.warning("fetch.known_unavailable", error=str(exc))
        return KnownFetched()
    pages = sorted((version.path / "pages").glob("*.parquet")) if version is not None else []
    if not pages:
        return KnownFetched()
    query = f"""
        SELECT (md5_number(p.url) & {_LOW64}::UHUGEINT)::UBIGINT AS h
        FROM {parquet_source(pages, PAGES)} p
        WHERE p.next_fetch > {sql_literal(utc_naive(now or datetime.now(UTC)))}
          AND p.status NOT IN ('{DbStatus.UNFETCHED}', '{DbStatus.RETRY}')
          AND p.host IN (SELECT DISTINCT host FROM {parquet_source(fetchlists, FETCHLIST)})
        LIMIT {_MAX_KNOWN}"""
    con = connect(cfg.jobs)
    hashes = array("Q")
    try:
        for batch in arrow_batches(con, f"SELECT h FROM ({query}) ORDER BY h"):
            column = batch.column(0)  # UBIGINT, never null: the values buffer is the hashes as they are
            hashes.frombytes(column.buffers()[1][column.offset * 8:(column.offset + len(column)) * 8])
    except Exception as exc:  # noqa: BLE001 - a webdb pruned or rewritten under us: fetch as before
        log.warning("fetch.known_unavailable", version=str(version.path), error=str(exc).splitlines()[0])
        return KnownFetched()
    finally:
        con.close()
    known = KnownFetched(hashes)
    log.info("fetch.known_loaded", urls=len(known), version=str(version.path))
    return known
