"""updatedb: merge fetched segments into the next webdb version.

For every URL fetched in the given segments, the latest fetch record (by
fetch_time) decides its new state through the status machine in
``webdb/transitions.py``. Pages found by the fetch become new ``unfetched``
pages due now: the outlinks of successfully fetched pages (the first
``db.max_outlinks`` distinct ones in page order, ``sitemap.max_urls`` of a
sitemap's, plus every robots.txt Sitemap: URL the fetcher appended; only
same-host ones under ``db.ignore_external_links``, only those ``urls.*``
filters keep) and the targets of redirects. What the caps cut is counted:
``updatedb.done`` and meta.json's ``over_cap`` (totals over merged segments).

Scores follow OPIC (Abiteboul et al., as Nutch's OPICScoringFilter): each
page fetched in these segments hands its score, divided by its number of kept
outlinks, to every page it links to (a redirect hands on its whole score), and
a page's score is the cash it ever received: existing pages add it, new pages
start from it (a fetched URL no one linked to starts at ``db.score_injected``).
Self-links carry nothing. The next fetch interval comes from the schedule
(``webdb/schedule.py``), the rest of the page's state from the status table.
The links table replaces the outlinks of every page fetched and parsed again.

The merge is a handful of SQL statements over the Parquet parts (so it can run
on Spark over the same layout). It holds the webdb lock and builds the next
version under a temporary name: readers see the old version until CURRENT
names the new one. Segments the live version already merged (recorded in its
meta.json) are skipped, so running updatedb twice changes nothing.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from crawler.config import CrawlerConfig, DbConfig, usable_cores
from crawler.errors import StorageError
from crawler.fsutil import remove_tree
from crawler.jobs import traps
from crawler.jobs.engine import JobEngine, first_line, open_engine
from crawler.jobs.progress import JobProgress
from crawler.jobs.sql import (
    first_of_each_sql,
    host_differs_sql,
    host_sql,
    parse_data_source,
    segment_source,
    sql_literal,
    typed_columns,
    utc_naive,
)
from crawler.models import FETCHER, LINKS, PAGES, DbStatus, FetchStatus
from crawler.segments.layout import Segment, part_name, require_fetched
from crawler.urls.filters import check_sql_patterns, filter_sql
from crawler.webdb.schedule import interval_sql
from crawler.webdb.store import Version, VersionedStore
from crawler.webdb.transitions import render_sql

_SIMHASH_THREADS = 4

# A cap of 0 means none: a bound no list reaches keeps the SQL the same (and Spark's slice lengths non-negative).
_NO_CAP = 2**31 - 1


# Keys of UpdateReport.over_cap, of meta.json's "over_cap" (totals over every merged segment) and readdb --stats.
OVER_CAP_KEYS = ("outlinks", "sitemap_urls", "pages")


@dataclass
class UpdateReport:
    version: int
    segments: list[str]
    fetched: int
    new_urls: int
    # Outlinks the caps cut (db.max_outlinks of pages, sitemap.max_urls of sitemaps) and the pages that lost some.
    over_cap: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OVER_CAP_KEYS, 0))
    by_status: dict[str, int] = field(default_factory=dict)
    unfollowed: tuple[int, int] = (0, 0)  # pages whose content repeats a page of their host, and their outlinks (traps.py)



def _cap(limit: int) -> str:
    return str(int(limit)) if limit else str(_NO_CAP)


def _to_merge(segments: list[Segment], current: Version | None, log: Any) -> list[Segment]:
    merged = set(current.merged_segments if current else [])
    chosen: list[Segment] = []
    for seg in segments:
        if seg.name in merged:
            log.info("updatedb.skipped", segment=seg.name, reason="already merged")
        elif seg.name in {s.name for s in chosen}:
            log.info("updatedb.skipped", segment=seg.name, reason="listed twice")
        else:
            chosen.append(seg)
    return chosen


def updatedb(
    cfg: CrawlerConfig, segments: list[Segment], log: Any, now: datetime | None = None
) -> UpdateReport:
    for seg in segments:
        require_fetched(seg)
    store = VersionedStore(cfg.crawl_path / "webdb")
    with store.lock():
        current = store.current()
        chosen = _to_merge(segments, current, log)
        if not chosen:
            number = current.number if current else 0
            log.info("updatedb.nothing", version=number)
            return UpdateReport(number, [], 0, 0, by_status={})
        meta = {k: v for k, v in (current.meta if current else {}).items() if k not in ("version", "created")}
        meta["merged_segments"] = (current.merged_segments if current else []) + [s.name for s in chosen]
        con = open_engine(cfg)
        try:
            check_sql_patterns(cfg.urls, con)
            with JobProgress("updatedb", 7, log) as progress, store.new_version(meta) as temp:
                report = _merge(con, cfg, current, chosen, temp, utc_naive(now), progress)
                # Read by new_version when it writes meta.json, after this block.
                meta["over_cap"] = add_over_cap(meta.get("over_cap"), report.over_cap)
                traps.record(meta, traps.detect(con, cfg, traps.pages_of(con, temp), meta.get("traps") or []), log,
                             str(chosen[-1].name))
        except con.errors as exc:
            raise StorageError(f"updatedb: {first_line(exc)}") from exc
        finally:
            con.close()
        report.version = store.require_current().number
    log.info(
        "updatedb.done",
        version=report.version,
        segments=report.segments,
        fetched=report.fetched,
        new_urls=report.new_urls,
        outlinks_over_cap=report.over_cap["outlinks"],
        sitemap_urls_over_cap=report.over_cap["sitemap_urls"],
        pages_over_cap=report.over_cap["pages"],
        unfollowed_pages=report.unfollowed[0],
        unfollowed_outlinks=report.unfollowed[1],
        by_status=report.by_status,
    )
    return report


def add_over_cap(total: Any, more: dict[str, int]) -> dict[str, int]:
    """``total`` (meta.json's "over_cap", absent before this count existed) plus ``more``."""
    total = total if isinstance(total, dict) else {}
    return {k: int(total.get(k) or 0) + int(more.get(k) or 0) for k in OVER_CAP_KEYS}


def _merge(
    con: JobEngine,
    cfg: CrawlerConfig,
    current: Version | None,
    segments: list[Segment],
    out: Path,
    now: datetime,
    progress: JobProgress,
) -> UpdateReport:
    """The next version's pages and links in ``out``: one named step after another, each leaving its tables."""
    # The SimHashes are Python work (numpy on each text) that the SQL statements do not need before the pages are
    # written: computed in threads while DuckDB runs those statements (it releases the GIL). With the host
    # test below, updatedb of a 4,259-page tree took 440 ms instead of 680 (docs/benchmarks.md). One thread
    # a core (jobs.threads, as DuckDB), each taking a share of the parts: numpy's array operations release the
    # GIL too, and the statements were done long before one thread's SimHashes of a 36,890-page round (2.9 s;
    # 1.65 s in two). At most _SIMHASH_THREADS: each holds a batch of texts and its arrays (~15 MB).
    threads = min(int(cfg.jobs.threads) or usable_cores(), _SIMHASH_THREADS)
    with ThreadPoolExecutor(threads, thread_name_prefix="simhash") as pool:
        texts = [pool.submit(traps.signatures, con, segments, (i, threads)) for i in range(threads)]
        return _merge_steps(con, cfg, current, segments, out, now, progress, texts)


def _merge_steps(con: JobEngine, cfg: CrawlerConfig, current: Version | None, segments: list[Segment], out: Path,
                 now: datetime, progress: JobProgress, texts: list[Future[pa.Table]]) -> UpdateReport:
    old_parts = _parts(current, "pages")
    old_pages = con.source(old_parts, PAGES)
    # Scratch for the engine's staged results, inside the version being built: gone with it should the job fail.
    staging = out / ".staging"
    staging.mkdir()
    old_links = con.source(_parts(current, "links"), LINKS)
    progress.step("read fetch records")
    _read_fetched(con, segments, old_pages)
    progress.step("read parse data")
    _read_parsed(con, cfg, segments, staging)
    progress.step("select outlinks")
    traps.unfollow_duplicates(con, cfg, old_pages, old_links)
    new_links = _new_links()
    progress.step("distribute scores")
    _distribute_scores(con, cfg, new_links, progress.log)
    pages_query = _pages_query(cfg.db, old_pages, now)
    progress.step("write pages")
    con.register("signatures", pa.concat_tables([share.result() for share in texts]))
    written_pages = _write_pages(con, pages_query, out)
    progress.step("write links")
    _write_links(con, old_links, new_links, out)
    progress.step("count")
    report = _count(con, segments, old_parts, out, written_pages)
    remove_tree(staging)
    return report


def _read_fetched(con: JobEngine, segments: list[Segment], old_pages: str) -> None:
    """Table ``fetched``: the latest fetch record of each URL, with Last-Modified parsed and the page's old score.

    The old score (NULL for a page the webdb did not hold) is what the page hands on (``_distribute_scores``):
    joined here, to the fetch records, it reaches the outlinks with them, and no join meets the exploded
    outlinks, whose count DuckDB cannot foresee (it built a hash table of all of them, +106 MB at 583k).
    """
    columns = ", ".join(f"l.{name}" for name in ["segment", *FETCHER.names])
    con.create_table("fetched", f"""
        SELECT {columns}, try_strptime(l.last_modified, '%a, %d %b %Y %H:%M:%S GMT') AS modified_time,
               p.score AS old_score
        FROM (SELECT *, row_number() OVER (PARTITION BY url ORDER BY fetch_time DESC NULLS LAST, segment DESC) AS rn
              FROM {segment_source(con, segments, "fetcher", FETCHER)}) l
        LEFT JOIN {old_pages} p ON p.url = l.url
        WHERE l.rn = 1 AND l.url IS NOT NULL""")


def _read_parsed(con: JobEngine, cfg: CrawlerConfig, segments: list[Segment], staging: Path) -> None:
    """Table ``parsed`` (url, status, num_outlinks): the ``fetched`` records parsed, from the same segment; and the
    outlinks each successful one keeps, staged as ``kept_links`` (one row per outlink, with its page's figures).

    Kept: valid, filtered, the first occurrence of each target in page order, the first db.max_outlinks of
    those (sitemap.max_urls of a sitemap's); then the robots.txt Sitemap: URLs the fetcher appended (never
    cut) not already kept. over_cap counts what the cap cut, in the same pass (less a robots.txt Sitemap: URL
    the page also linked past the cap: it is queued all the same); a page the cap cut keeps at least one
    outlink, so its count is on its rows. fanout is the number the page keeps, old_score its score before.
    Per page, with list functions: no global sort or window over all outlinks, so memory stays bounded at
    tens of millions of links. Lists of robots.txt URLs are NULL on the pages without.
    """
    db = cfg.db
    parse_data = parse_data_source(con, segments)
    on_record = "d.segment = f.segment AND d.url = f.url"
    # Each list's length taken before the join: joined first, the lists went into its hash table (+70 MB at 885k).
    con.create_table("parsed", f"""
        SELECT f.url, f.status, d.num_outlinks FROM fetched f
        JOIN (SELECT segment, url, array_length(outlinks) AS num_outlinks FROM {parse_data} d) d ON {on_record}""")
    # The page's host once per page, each outlink's mostly without the regex (as invertlinks): the two
    # regexes per outlink were three quarters of this step on a tree of 4,259 pages and 216k outlinks.
    page_host, same_host = "", ""
    if db.ignore_external_links:
        page_host, same_host = f", {host_sql('url')} AS page_host", f"AND NOT {host_differs_sql('o.url', 'f.page_host')}"
    valid = f"lambda o: o.url IS NOT NULL AND o.url <> '' {same_host} AND {filter_sql(cfg.urls, 'o.url')}"
    n = "array_length(d.outlinks)"
    has_robots = "coalesce(array_length(r), 0) > 0"
    joined = f"""
        SELECT f.url, f.old_score, d.is_sitemap,
               CASE WHEN d.is_sitemap THEN {_cap(cfg.sitemap.max_urls)} ELSE {_cap(db.max_outlinks)} END AS cap,
               list_filter(CASE WHEN d.robots_sitemaps = 0 THEN d.outlinks
                                ELSE d.outlinks[1:{n} - d.robots_sitemaps] END, {valid}) AS l,
               CASE WHEN d.robots_sitemaps > 0 THEN list_filter(d.outlinks[{n} - d.robots_sitemaps + 1:{n}], {valid}) END AS r
        FROM (SELECT *{page_host} FROM fetched WHERE status = '{FetchStatus.SUCCESS}') f
        JOIN {parse_data} d ON {on_record}"""
    with_targets = f"""
        SELECT *, list_transform(l, lambda y: y.url) AS targets,
               CASE WHEN {has_robots} THEN list_transform(r, lambda y: y.url) END AS robots_targets
        FROM ({joined}) joined"""
    unique = f"""
        SELECT url, old_score, is_sitemap, cap, targets, {first_of_each_sql('l', 'targets')} AS u,
               CASE WHEN {has_robots} THEN {first_of_each_sql('r', 'robots_targets')} END AS r
        FROM ({with_targets}) with_targets"""
    capped = f"""
        SELECT *, u[1:cap] AS capped,
               CASE WHEN {has_robots} THEN list_transform(u[1:cap], lambda y: y.url) END AS capped_targets
        FROM ({unique}) uniq"""
    kept = f"""
        SELECT url, old_score, is_sitemap,
               greatest(array_length(u) - cap, 0) - CASE WHEN {has_robots}
                   THEN array_length(list_filter(r, lambda o: list_contains(targets, o.url)
                                                      AND NOT list_contains(capped_targets, o.url))) ELSE 0 END
                   AS over_cap,
               CASE WHEN {has_robots}
                    THEN list_concat(capped, list_filter(r, lambda o: NOT list_contains(capped_targets, o.url)))
                    ELSE capped END AS kept
        FROM ({capped}) capped"""
    con.stage("kept_links", f"""
        SELECT url AS from_url, o.url AS to_url, o.anchor AS anchor, fanout, old_score, is_sitemap, over_cap
        FROM (SELECT url, old_score, is_sitemap, over_cap, array_length(kept) AS fanout, unnest(kept) AS o
              FROM ({kept}) kept) exploded""", staging)


def _new_links() -> str:
    """The kept outlinks of the pages followed (not in ``unfollowed``), with their page's fanout and old score."""
    return """(SELECT from_url, to_url, anchor, fanout, old_score FROM kept_links
        WHERE from_url NOT IN (SELECT url FROM unfollowed))"""


def _distribute_scores(con: JobEngine, cfg: CrawlerConfig, new_links: str, log: Any) -> None:
    """Table ``touched``: every URL this update touches (``new_links`` and redirect targets, fetched URLs) with the OPIC cash
    handed to it, and whether anyone linked to it (a new page starts from 0 then, not the injected score)."""
    db = cfg.db
    redirects = f"('{FetchStatus.REDIRECT_PERM}', '{FetchStatus.REDIRECT_TEMP}')"
    # The old scores of the pages fetched came with them (fetched.old_score): no join here.
    con.create_table("touched", f"""
        WITH e AS (
            SELECT from_url, to_url, fanout, old_score FROM {new_links} n
            UNION ALL
            SELECT url, redirect_url, 1, old_score FROM fetched
            WHERE status IN {redirects} AND redirect_url IS NOT NULL AND redirect_url <> ''
              AND {filter_sql(cfg.urls, "redirect_url")}
        )
        SELECT url, sum(cash) AS cash, bool_or(linked) AS linked FROM (
            SELECT e.to_url AS url, true AS linked,
                   CASE WHEN e.to_url = e.from_url THEN 0.0
                        ELSE coalesce(e.old_score, {float(db.score_injected)!r}) / e.fanout END AS cash
            FROM e
            UNION ALL
            SELECT url, false, 0.0 FROM fetched) shares
        GROUP BY url""")
    unknown = con.rows(
        f"SELECT count(*) FROM fetched WHERE status NOT IN ({', '.join(repr(str(s)) for s in FetchStatus)})"
    )[0][0]
    if unknown:
        log.warning("updatedb.unknown_status", records=unknown)


def _pages_query(db: DbConfig, old_pages: str, now: datetime) -> str:
    """The next version's pages: the old ones and the ``touched`` ones, as the ``fetched`` records decide them."""
    interval = interval_sql(db, fetched="f", page="p")
    rules = render_sql(db, fetched="f", page="p", page_interval=interval)

    def decided(column: str) -> str:
        return f"CASE WHEN f.url IS NULL THEN p.{column} ELSE {rules[column]} END AS {column}"

    def fetched_value(column: str, value: str) -> str:
        return f"CASE WHEN f.url IS NULL THEN p.{column} ELSE {value} END AS {column}"

    # One pass over the old pages: joined with what this update touched, a URL the webdb did not
    # know becomes a new unfetched page due now (in PAGES order), which the fetch record may then decide.
    new_page = {
        "url": "t.url",
        "host": host_sql("t.url"),
        "status": f"'{DbStatus.UNFETCHED}'",
        "fetch_time": "NULL",
        "next_fetch": sql_literal(now),
        "retries": "0",
        "fetch_interval": f"CAST({float(db.fetch_interval)!r} AS DOUBLE)",
        "score": f"CAST(CASE WHEN t.linked THEN 0.0 ELSE {float(db.score_injected)!r} END AS DOUBLE)",
    }
    known = ", ".join(
        f"CASE WHEN o.url IS NULL THEN {new_page.get(name, 'NULL')} ELSE o.{name} END AS {name}" for name in PAGES.names
    )
    return f"""
        SELECT p.url, p.host, {decided("status")},
               {fetched_value("fetch_time", "f.fetch_time")}, {decided("next_fetch")}, {decided("retries")},
               {fetched_value("fetch_interval", interval)}, p.score + coalesce(p.cash, 0.0) AS score,
               {decided("digest")},
               coalesce(d.num_outlinks, p.num_outlinks) AS num_outlinks,
               {decided("modified_time")}, {decided("etag")},
               {fetched_value("http_status", "f.http_status")},
               CASE WHEN f.status = '{FetchStatus.SUCCESS}' THEN g.simhash ELSE p.simhash END AS simhash
        FROM (SELECT {known}, t.cash
              FROM {old_pages} o FULL OUTER JOIN touched t ON t.url = o.url) p
        LEFT JOIN fetched f ON f.url = p.url
        LEFT JOIN parsed d ON d.url = p.url
        LEFT JOIN signatures g ON g.segment = f.segment AND g.url = f.url"""


def _write_pages(con: JobEngine, pages_query: str, out: Path) -> int:
    """``out``/pages; returns the number of pages written."""
    (out / "pages").mkdir()
    pages_part = out / "pages" / part_name(0)
    # Not sorted by URL: at 10M pages the sort was a third of this step and most of its memory,
    # and every reader that needs an order (readdb, generate) sorts what it selects.
    return con.write(f"SELECT {typed_columns(PAGES)} FROM ({pages_query}) merged", pages_part, PAGES, single=False)


def _write_links(con: JobEngine, old_links: str, new_links: str, out: Path) -> None:
    """``out``/links: the old links but those of pages fetched and parsed again, and ``new_links``."""
    links_query = f"""
        SELECT from_url, to_url, anchor FROM {old_links} l
        WHERE NOT EXISTS (SELECT 1 FROM parsed s WHERE s.url = l.from_url AND s.status = '{FetchStatus.SUCCESS}')
        UNION ALL
        SELECT from_url, to_url, anchor FROM {new_links} n"""
    (out / "links").mkdir()
    con.write(f"SELECT {typed_columns(LINKS)} FROM ({links_query}) merged", out / "links" / part_name(0), LINKS, single=False)


def _count(con: JobEngine, segments: list[Segment], old_parts: list[Path], out: Path, written_pages: int) -> UpdateReport:
    """The report's figures, from the pages written and the tables of the steps."""
    written = con.source(sorted((out / "pages").glob("*.parquet")), PAGES)
    by_status = dict(
        con.rows(
            f"""SELECT status, count(*) FROM {written} w
            WHERE EXISTS (SELECT 1 FROM fetched f WHERE f.url = w.url) GROUP BY status ORDER BY status"""
        )
    )
    # One statement for the figures over the steps' tables (each an aggregate: one row, so the cross joins give
    # one): on a small update each statement costs more to plan than to run.
    outlinks, sitemap_urls, pages, unfollowed, unfollowed_links, fetched = con.rows(f"""SELECT c.*, u.*, f.*
        FROM (SELECT coalesce(sum(CASE WHEN is_sitemap THEN 0 ELSE over_cap END), 0) AS outlinks,
                     coalesce(sum(CASE WHEN is_sitemap THEN over_cap ELSE 0 END), 0) AS sitemap_urls,
                     count(*) AS pages
              FROM (SELECT from_url, max(is_sitemap) AS is_sitemap, max(over_cap) AS over_cap FROM kept_links
                    WHERE over_cap > 0 GROUP BY from_url) cut) c
        CROSS JOIN {traps.unfollowed_figures()} u
        CROSS JOIN (SELECT count(*) AS fetched FROM fetched) f""")[0]
    return UpdateReport(
        version=0,
        segments=[s.name for s in segments],
        fetched=int(fetched),
        new_urls=written_pages - con.count_rows(old_parts),
        over_cap={"outlinks": int(outlinks), "sitemap_urls": int(sitemap_urls), "pages": int(pages)},
        unfollowed=(int(unfollowed), int(unfollowed_links)),
        by_status=by_status,
    )


def _parts(version: Version | None, table: str) -> list[Path]:
    return sorted((version.path / table).glob("*.parquet")) if version else []
