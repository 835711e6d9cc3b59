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

With in-round following (``fetcher.follow_depth``, crawler/fetcher/follow.py)
the same query also takes every other URL of those hosts, unfetched and due
ones included: an outlink is followed only if the webdb does not know it at
all. Past the cap, following is off for that fetch (``fetch.follow_off``),
since a URL left out would be fetched a second time. The webdb's suspected
spider-trap prefixes come along, from the version's meta.json.
"""

from __future__ import annotations

import hashlib
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
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
    """The not-due URLs of the hosts in ``fetchlists``, from the live webdb version; empty if there is none."""
    return load_known(cfg, fetchlists, log, now).not_due


@dataclass(slots=True)
class Known:
    """What a fetch knows of its hosts' webdb URLs at its start."""

    not_due: KnownFetched = field(default_factory=KnownFetched)  # a redirect hop to one is not followed
    every: KnownFetched | None = None  # every URL of the hosts (with ``every``): in-round following skips them
    traps: dict[str, list[str]] = field(default_factory=dict)  # host -> prefixes of suspected spider traps


def load_known(cfg: CrawlerConfig, fetchlists: list[Path], log: Any, now: datetime | None = None, *,
               every: bool = False) -> Known:
    """The not-due URLs of the hosts in ``fetchlists`` and, with ``every``, all their URLs (None if they
    are more than the cap: following would then fetch known pages again), from the live webdb version.

    Never fails a fetch: an unreadable webdb is logged and the fetch follows every hop as before, and
    no outlink in the round.
    """
    if not fetchlists:
        return Known()
    try:
        version = VersionedStore(cfg.crawl_path / "webdb").current()
    except CrawlerError as exc:
        log.warning("fetch.known_unavailable", error=str(exc))
        return Known()
    pages = sorted((version.path / "pages").glob("*.parquet")) if version is not None else []
    if version is None or not pages:
        return Known()
    not_due = f"""(p.next_fetch > {sql_literal(utc_naive(now or datetime.now(UTC)))}
          AND p.status NOT IN ('{DbStatus.UNFETCHED}', '{DbStatus.RETRY}'))"""
    query = f"""
        SELECT (md5_number(p.url) & {_LOW64}::UHUGEINT)::UBIGINT AS h, coalesce({not_due}, false) AS not_due
        FROM {parquet_source(pages, PAGES)} p
        WHERE p.host IN (SELECT DISTINCT host FROM {parquet_source(fetchlists, FETCHLIST)})
          {"" if every else f"AND {not_due}"}
        LIMIT {_MAX_KNOWN}"""
    con = connect(cfg.jobs)
    hashes, fetched = array("Q"), array("Q")
    try:
        for batch in arrow_batches(con, f"SELECT h, not_due FROM ({query}) ORDER BY h"):
            _extend(hashes, batch.column(0))
            _extend_where(fetched, batch.column(0), batch.column(1))
    except Exception as exc:  # noqa: BLE001 - a webdb pruned or rewritten under us: fetch as before
        log.warning("fetch.known_unavailable", version=str(version.path), error=str(exc).splitlines()[0])
        return Known()
    finally:
        con.close()
    known = Known(KnownFetched(fetched), traps=_trap_prefixes(version.meta))
    if every:
        if len(hashes) < _MAX_KNOWN:
            known.every = KnownFetched(hashes)
        else:
            log.warning("fetch.follow_off", reason=f"the fetchlist's hosts have {_MAX_KNOWN} URLs or more")
    log.info("fetch.known_loaded", urls=len(known.not_due), every=len(hashes) if every else None,
             version=str(version.path))
    return known


def _extend(hashes: array, column: Any) -> None:
    """Append a UBIGINT Arrow array (never null) as it is: its values buffer is the hashes."""
    hashes.frombytes(column.buffers()[1][column.offset * 8:(column.offset + len(column)) * 8])


def _extend_where(hashes: array, column: Any, keep: Any) -> None:
    """Append the values of a UBIGINT Arrow array (never null) where the BOOLEAN array ``keep`` (never null)
    is true.

    With numpy, not pyarrow.compute: importing that builds the docstrings of every compute function,
    ~40 ms of each fetch's start, for this one filter; numpy is loaded already (pyarrow imports it).
    """
    import numpy as np

    n = len(column)
    if not n:
        return
    values = np.frombuffer(column.buffers()[1], dtype="<u8", count=column.offset + n)[column.offset:]
    bits = np.unpackbits(np.frombuffer(keep.buffers()[1], dtype=np.uint8), bitorder="little")
    hashes.frombytes(values[bits[keep.offset:keep.offset + n].view(bool)].tobytes())


def _trap_prefixes(meta: dict[str, Any]) -> dict[str, list[str]]:
    """meta.json's suspected spider traps (crawler/jobs/traps.py), by host."""
    prefixes: dict[str, list[str]] = {}
    for trap in meta.get("traps") or []:
        if isinstance(trap, dict) and trap.get("host") and trap.get("prefix"):
            prefixes.setdefault(str(trap["host"]), []).append(str(trap["prefix"]))
    return prefixes
