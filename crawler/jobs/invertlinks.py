"""invertlinks: build the link database, each URL's inlinks with their anchor text, from segments.

``linkdb/`` is versioned exactly like the webdb (``VersionedStore``: CURRENT,
``vNNNNNN/``, ``.lock``, ``meta.json`` listing the merged segments), with one
table, split into buckets by a hash of the link target::

    linkdb/v000004/inlinks/part-00003.parquet   to_url, from_url, anchor (bucket 3; sorted by to_url, from_url)
    linkdb/v000004/meta.json                    {"buckets": 8, "merged_segments": [...], ...}

(an engine may write a bucket as several parts, ``part-00003-00001.parquet``...,
in order). The outlinks of every page whose latest fetch in the given segments
succeeded are inverted: one row per (to_url, from_url), the first anchor in page
order. They replace that page's earlier inlink rows, so refetching a page that
dropped a link drops the inlink. Self-links are left out; links between pages
of one host too under ``linkdb.ignore_internal`` (Nutch's default: anchors from
other sites say more about a page); link targets the ``urls.*`` filters reject
are left out as in the webdb. Each URL keeps at most ``linkdb.max_inlinks``
inlinks (0: all), the first by source URL. Segments the live version already
merged are skipped, so running it twice changes nothing.

Why buckets: capping per URL and sorting by URL over all inlinks at once needs
memory (or temp space) for all of them; at 20M inlinks that spilled over 60 GB.
A URL's inlinks all fall in one bucket, so each bucket is capped, sorted and
written on its own, and the work space is one bucket's. There are about
``linkdb.bucket_rows`` inlinks per bucket, a power of two of buckets, so a
bucket of one version lines up with one or several of the next even when the
count changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.errors import StorageError
from crawler.jobs.engine import JobEngine, first_line, open_engine
from crawler.jobs.progress import JobProgress
from crawler.jobs.sql import (
    first_of_each_sql,
    host_differs_sql,
    host_sql,
    md5_prefix_sql,
    parse_data_source,
    segment_source,
    typed_columns,
)
from crawler.models import FETCHER, INLINKS, PARSE_DATA, FetchStatus
from crawler.segments.layout import Segment, list_segments, part_name, require_fetched
from crawler.urls.filters import check_sql_patterns, filter_sql
from crawler.webdb.store import Version, VersionedStore

MAX_BUCKETS = 1 << 16  # the bucket number comes from 16 bits of MD5
_PART = re.compile(r"^part-(\d+)")


@dataclass
class InvertReport:
    version: int
    segments: list[str]
    sources: int
    inlinks: int


def linkdb_store(cfg: CrawlerConfig) -> VersionedStore:
    return VersionedStore(cfg.crawl_path / "linkdb")


def inlink_parts(version: Version | None) -> list[Path]:
    return sorted((version.path / "inlinks").glob("*.parquet")) if version else []


def unlinked_segments(cfg: CrawlerConfig) -> list[Segment]:
    """Segments the live webdb merged but the live linkdb did not, oldest first (a run cut off between the two).

    Only segments still on disk with a finished fetch: one deleted since (pruned) has nothing left to invert.
    """
    webdb = VersionedStore(cfg.crawl_path / "webdb").current()
    linkdb = linkdb_store(cfg).current()
    pending = set(webdb.merged_segments if webdb else []) - set(linkdb.merged_segments if linkdb else [])
    return [s for s in list_segments(cfg.crawl_path / "segments") if s.name in pending and s.fetched]


def hash_sql(url: str, digest: str | None = None) -> str:
    """SQL for a URL's hash, the first 16 bits of its MD5 (0 to 65535); its bucket is the hash mod the bucket count.

    The count is a power of two, so bucket b of N buckets is exactly buckets b, b + N, ...
    of 2N. ``digest``: a column already holding ``md5(url)``.
    """
    return md5_prefix_sql(digest or f"md5({url})", 4)


def bucket_count(rows: int, bucket_rows: int) -> int:
    """The smallest power of two of buckets holding ``rows`` at ``bucket_rows`` each (at most MAX_BUCKETS)."""
    buckets = 1
    while buckets * bucket_rows < rows and buckets < MAX_BUCKETS:
        buckets *= 2
    return buckets


def invertlinks(cfg: CrawlerConfig, segments: list[Segment], log: Any) -> InvertReport:
    for seg in segments:
        require_fetched(seg)
    store = linkdb_store(cfg)
    with store.lock():
        current = store.current()
        merged = set(current.merged_segments if current else [])
        chosen = list({s.name: s for s in segments if s.name not in merged}.values())
        if not chosen:
            number = current.number if current else 0
            log.info("invertlinks.nothing", version=number, reason="segments already merged")
            return InvertReport(number, [], 0, 0)
        meta: dict[str, Any] = {"merged_segments": sorted(merged) + [s.name for s in chosen]}
        con = open_engine(cfg)
        try:
            check_sql_patterns(cfg.urls, con)
            with JobProgress("invertlinks", 3, log) as progress, store.new_version(meta) as temp:
                sources, inlinks = _invert(con, cfg, current, chosen, temp, progress, meta)
        except con.errors as exc:
            raise StorageError(f"invertlinks: {first_line(exc)}") from exc
        finally:
            con.close()
        number = store.require_current().number
    log.info("invertlinks.done", version=number, segments=[s.name for s in chosen], sources=sources, inlinks=inlinks,
             buckets=meta["buckets"])
    return InvertReport(number, [s.name for s in chosen], sources, inlinks)


def _old_buckets(current: Version | None) -> tuple[int, dict[int, list[Path]]]:
    """The live version's bucket count and its parts by bucket (a version from before buckets: one)."""
    buckets = int(current.meta.get("buckets", 1)) if current else 1
    parts: dict[int, list[Path]] = {}
    for part in inlink_parts(current):
        match = _PART.match(part.name)
        bucket = int(match.group(1)) if match and buckets > 1 else 0
        parts.setdefault(bucket, []).append(part)
    return buckets, parts


def _invert(
    con: JobEngine,
    cfg: CrawlerConfig,
    current: Version | None,
    segments: list[Segment],
    out: Path,
    progress: JobProgress,
    meta: dict[str, Any],
) -> tuple[int, int]:
    progress.step("read parse data")
    # Pages whose latest fetch succeeded and was parsed: their inlink rows are replaced.
    con.create_table("sources", f"""
        SELECT f.segment, f.url
        FROM (SELECT segment, url, status, row_number() OVER (
                  PARTITION BY url ORDER BY fetch_time DESC NULLS LAST, segment DESC) AS rn
              FROM {segment_source(con, segments, "fetcher", FETCHER)}) f
        WHERE f.rn = 1 AND f.status = '{FetchStatus.SUCCESS}' AND EXISTS (
            SELECT 1 FROM {segment_source(con, segments, "parse_data", PARSE_DATA)} d
            WHERE d.segment = f.segment AND d.url = f.url)""")
    old_buckets, old_parts = _old_buckets(current)
    old_rows = con.count_rows([p for parts in old_parts.values() for p in parts])

    progress.step("invert outlinks")
    # The source's host once per page, the target's mostly without a regex: those regexes were half of this step.
    internal, source_host = "", ""
    if cfg.linkdb.ignore_internal:
        internal, source_host = f"AND {host_differs_sql('o.url', 'source_host')}", f", {host_sql('s.url')} AS source_host"
    # Per source page with list functions (as updatedb): no global aggregate over all links.
    # Each row's hash is taken here once; its bucket is picked when the count is known.
    con.create_table("new_inlinks", f"""
        WITH parsed AS (
            SELECT s.url, d.outlinks{source_host}
            FROM sources s JOIN {parse_data_source(con, segments)} d
              ON d.segment = s.segment AND d.url = s.url
        ),
        kept AS (
            SELECT url, list_filter(outlinks, lambda o: o.url IS NOT NULL AND o.url <> '' AND o.url <> url
                                               {internal} AND {filter_sql(cfg.urls, "o.url")}) AS l
            FROM parsed
        ),
        firsts AS (
            SELECT url, {first_of_each_sql("l", "targets")} AS l
            FROM (SELECT *, list_transform(l, lambda y: y.url) AS targets FROM kept) with_targets
        )
        SELECT to_url, from_url, anchor, {hash_sql("to_url", "digest")} AS url_hash
        FROM (SELECT o.url AS to_url, url AS from_url, o.anchor AS anchor, md5(o.url) AS digest
              FROM (SELECT url, unnest(l) AS o FROM firsts) exploded) hashed""")
    # Both counts in one statement: on a small update each statement costs more to plan than to run.
    sources, new_rows = (int(n) for n in con.rows(
        "SELECT (SELECT count(*) FROM sources), (SELECT count(*) FROM new_inlinks)")[0])
    buckets = bucket_count(old_rows + new_rows, cfg.linkdb.bucket_rows)
    meta["buckets"] = buckets

    progress.step("write inlinks")
    (out / "inlinks").mkdir()
    written = 0
    shared = min(buckets, old_buckets)
    for bucket in range(buckets):
        # Old bucket b of N holds the rows of this bucket when b = bucket mod min(N, buckets);
        # with fewer buckets before, it also holds other buckets' rows, so those are filtered.
        parts = [p for b, ps in sorted(old_parts.items()) if b % shared == bucket % shared for p in ps]
        split = f"AND {hash_sql('o.to_url')} % {buckets} = {bucket}" if buckets > old_buckets else ""
        merged = f"""SELECT to_url, from_url, anchor FROM {con.source(parts, INLINKS)} o
                     WHERE NOT EXISTS (SELECT 1 FROM sources s WHERE s.url = o.from_url) {split}
                     UNION ALL SELECT to_url, from_url, anchor FROM new_inlinks
                     WHERE url_hash % {buckets} = {bucket}"""
        # A URL's inlinks all lie in this bucket: when it holds no more rows than the cap, none is over it.
        cap = cfg.linkdb.max_inlinks if con.count_rows(parts) + new_rows > cfg.linkdb.max_inlinks else 0
        written += con.write(
            f"{_capped(merged, cap)} ORDER BY to_url, from_url",
            out / "inlinks" / part_name(bucket),
            INLINKS,
            single=False,
        )
    return sources, written


def _capped(merged: str, cap: int) -> str:
    """The rows of ``merged`` with at most ``cap`` per to_url (0: all), the first by from_url, typed as INLINKS.

    Few URLs have more than ``cap`` inlinks: ranking only theirs costs half as much as a
    window over the whole bucket.
    """
    if not cap:
        return f"SELECT {typed_columns(INLINKS)} FROM ({merged}) m"
    return f"""WITH m AS ({merged}),
        crowded AS (SELECT to_url FROM m GROUP BY to_url HAVING count(*) > {int(cap)})
        SELECT {typed_columns(INLINKS)} FROM (
            SELECT to_url, from_url, anchor FROM m
            WHERE NOT EXISTS (SELECT 1 FROM crowded c WHERE c.to_url = m.to_url)
            UNION ALL
            SELECT to_url, from_url, anchor FROM (
                SELECT *, row_number() OVER (PARTITION BY to_url ORDER BY from_url) AS rn
                FROM m WHERE EXISTS (SELECT 1 FROM crowded c WHERE c.to_url = m.to_url)) ranked
            WHERE rn <= {int(cap)}) inlinks"""
