"""invertlinks: build the link database, each URL's inlinks with their anchor text, from segments.

``linkdb/`` is versioned exactly like the webdb (``VersionedStore``: CURRENT,
``vNNNNNN/``, ``.lock``, ``meta.json`` listing the merged segments), with one
table::

    linkdb/v000004/inlinks/part-00000.parquet   to_url, from_url, anchor (sorted by to_url, from_url)

The outlinks of every page whose latest fetch in the given segments succeeded
are inverted: one row per (to_url, from_url), the first anchor in page order.
They replace that page's earlier inlink rows, so refetching a page that
dropped a link drops the inlink. Self-links are left out; links between pages
of one host too under ``linkdb.ignore_internal`` (Nutch's default: anchors from
other sites say more about a page); link targets the ``urls.*`` filters reject
are left out as in the webdb. Each URL keeps at most ``linkdb.max_inlinks``
inlinks (0: all), the first by source URL. Segments the live version already
merged are skipped, so running it twice changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from crawler.config import CrawlerConfig
from crawler.errors import SegmentError, StorageError
from crawler.jobs.engine import DuckEngine, first_line, open_engine, typed_columns
from crawler.jobs.progress import JobProgress
from crawler.jobs.updatedb import host_sql, segment_source
from crawler.models import FETCHER, PARSE_DATA, FetchStatus
from crawler.segments.layout import Segment, part_name
from crawler.urls.filters import check_sql_patterns, filter_sql
from crawler.webdb.store import Version, VersionedStore

INLINKS = pa.schema([("to_url", pa.string()), ("from_url", pa.string()), ("anchor", pa.string())])


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


def invertlinks(cfg: CrawlerConfig, segments: list[Segment], log: Any) -> InvertReport:
    for seg in segments:
        if not seg.is_done("fetcher"):
            raise SegmentError(f"{seg.path}: fetch not finished (no fetcher/_SUCCESS); resume the fetch first")
    store = linkdb_store(cfg)
    with store.lock():
        current = store.current()
        merged = set(current.merged_segments if current else [])
        chosen = list({s.name: s for s in segments if s.name not in merged}.values())
        if not chosen:
            number = current.number if current else 0
            log.info("invertlinks.nothing", version=number, reason="segments already merged")
            return InvertReport(number, [], 0, 0)
        meta = {"merged_segments": sorted(merged) + [s.name for s in chosen]}
        con = open_engine(cfg)
        try:
            check_sql_patterns(cfg.urls, con)
            with JobProgress("invertlinks", 3, log) as progress, store.new_version(meta) as temp:
                sources, inlinks = _invert(con, cfg, current, chosen, temp, progress)
        except con.errors as exc:
            raise StorageError(f"invertlinks: {first_line(exc)}") from exc
        finally:
            con.close()
        number = store.require_current().number
    log.info("invertlinks.done", version=number, segments=[s.name for s in chosen], sources=sources, inlinks=inlinks)
    return InvertReport(number, [s.name for s in chosen], sources, inlinks)


def _invert(
    con: DuckEngine,
    cfg: CrawlerConfig,
    current: Version | None,
    segments: list[Segment],
    out: Path,
    progress: JobProgress,
) -> tuple[int, int]:
    progress.step("read parse data")
    con.create_table("sources", f"""
        SELECT f.url, d.outlinks
        FROM (SELECT segment, url, status, row_number() OVER (
                  PARTITION BY url ORDER BY fetch_time DESC NULLS LAST, segment DESC) AS rn
              FROM {segment_source(con, segments, "fetcher", FETCHER)}) f
        JOIN (SELECT segment, url, outlinks, row_number() OVER (PARTITION BY segment, url ORDER BY url) AS rn
              FROM {segment_source(con, segments, "parse_data", PARSE_DATA)}) d
          ON d.segment = f.segment AND d.url = f.url AND d.rn = 1
        WHERE f.rn = 1 AND f.status = '{FetchStatus.SUCCESS}'""")
    progress.step("invert outlinks")
    internal = f"AND {host_sql('o.url')} <> {host_sql('url')}" if cfg.linkdb.ignore_internal else ""
    # Per source page with list functions (as updatedb): no global aggregate over all links.
    con.create_table("new_inlinks", f"""
        WITH kept AS (
            SELECT url, list_filter(outlinks, lambda o: o.url IS NOT NULL AND o.url <> '' AND o.url <> url
                                               {internal} AND {filter_sql(cfg.urls, "o.url")}) AS l
            FROM sources
        ),
        firsts AS (
            SELECT url, list_filter(l, lambda o, i: list_position(targets, o.url) = i)
                   AS l
            FROM (SELECT *, list_transform(l, lambda y: y.url) AS targets FROM kept) with_targets
        )
        SELECT o.url AS to_url, url AS from_url, o.anchor AS anchor
        FROM (SELECT url, unnest(l) AS o FROM firsts) exploded""")
    old = con.source(inlink_parts(current), INLINKS)
    merged = f"""SELECT to_url, from_url, anchor FROM {old} o
                 WHERE NOT EXISTS (SELECT 1 FROM sources s WHERE s.url = o.from_url)
                 UNION ALL SELECT to_url, from_url, anchor FROM new_inlinks"""
    cap = cfg.linkdb.max_inlinks
    if cap:
        merged = f"""SELECT to_url, from_url, anchor FROM (
                         SELECT *, row_number() OVER (PARTITION BY to_url ORDER BY from_url) AS rn FROM ({merged}) m)
                     ranked WHERE rn <= {int(cap)}"""
    progress.step("write inlinks")
    (out / "inlinks").mkdir()
    written = con.write(
        f"SELECT {typed_columns(INLINKS)} FROM ({merged}) inlinks ORDER BY to_url, from_url",
        out / "inlinks" / part_name(0),
        INLINKS,
        single=False,
    )
    sources = con.rows("SELECT count(*) FROM sources")[0][0]
    return int(sources), written
