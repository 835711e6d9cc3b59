"""readdb: look into the live webdb version: statistics, a full dump, or one URL.

What ``crawler readdb`` prints. Everything reads the version CURRENT names, so
a job writing the next version at the same time is invisible. Dumps stream in
batches sorted by URL; JSON times are ISO-8601 UTC strings (DESIGN 6a).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import duckdb
import pyarrow as pa

from crawler.config import CrawlerConfig
from crawler.errors import UsageError, WebDbError
from crawler.jobs.engine import DuckEngine, connect, copy_to_parquet, iter_dicts, open_engine, parquet_source
from crawler.jobs.sql import iso_sql, typed_columns, utc_naive
from crawler.jobs.updatedb import add_over_cap
from crawler.models import LINKS, PAGES, DbStatus
from crawler.storage.references import is_reference_tree
from crawler.urls.normalize import InvalidUrl, Normalizer
from crawler.webdb.store import Version, VersionedStore

BATCH_ROWS = 10_000


def json_columns(schema: pa.Schema) -> str:
    """Every column of ``schema``, timestamps rendered as JSON time strings."""
    return ", ".join(
        f"{iso_sql(f.name)} AS {f.name}" if pa.types.is_timestamp(f.type) else f.name for f in schema
    )


@contextmanager
def _live(cfg: CrawlerConfig) -> Iterator[tuple[Version, duckdb.DuckDBPyConnection, str, str]]:
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    con = connect(cfg.jobs)
    try:
        pages = parquet_source(sorted((version.path / "pages").glob("*.parquet")), PAGES)
        links = parquet_source(sorted((version.path / "links").glob("*.parquet")), LINKS)
        yield version, con, pages, links
    except duckdb.Error as exc:
        raise WebDbError(f"{version.path}: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()


def _by_status(counts: dict[Any, Any]) -> dict[str, int]:
    """Every status with its count, zeros too, then any status no code writes (shown anyway)."""
    counts = {str(k): int(v) for k, v in counts.items()}
    by_status = {str(s): counts.pop(str(s), 0) for s in DbStatus}
    by_status.update(counts)
    return by_status


def webdb_figures(cfg: CrawlerConfig) -> dict[str, Any]:
    """The live version's number, its URL count and its count per status: what a daemon cycle reports.

    Counted through the job engine in a reference tree (Spark jobs over a bucket: the webdb's parts stay
    in the bucket, where only the executors read them), by DuckDB on local parts otherwise (a Spark job
    would cost seconds on a cluster for what DuckDB counts in milliseconds).
    """
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    con = open_engine(cfg) if is_reference_tree(cfg.crawl_path) else DuckEngine(cfg.jobs)
    try:
        pages = con.source(sorted((version.path / "pages").glob("*.parquet")), PAGES)
        by_status = _by_status(dict(con.rows(f"SELECT status, count(*) FROM {pages} GROUP BY status")))
    finally:
        con.close()
    return {"version": version.number, "urls": sum(by_status.values()), "by_status": by_status}


def db_stats(cfg: CrawlerConfig, now: datetime | None = None) -> dict[str, Any]:
    """Version, URL count, count per status (every status, zeros too), score min/avg/max, hosts,
    URLs due now (what generate could select, before per-host limits), link count, and the outlinks
    the caps cut (``over_cap``: db.max_outlinks, sitemap.max_urls; totals over every merged segment)."""
    with _live(cfg) as (version, con, pages, links):
        counts = dict(con.execute(f"SELECT status, count(*) FROM {pages} GROUP BY status").fetchall())
        total, low, mean, high, hosts, due = con.execute(
            f"""SELECT count(*), min(score), avg(score), max(score), count(DISTINCT host),
                       count(*) FILTER (WHERE next_fetch <= ? AND status <> '{DbStatus.DUPLICATE}')
                FROM {pages}""",
            [utc_naive(now)],
        ).fetchall()[0]
        (link_count,) = con.execute(f"SELECT count(*) FROM {links}").fetchall()[0]
    by_status = _by_status(counts)
    return {
        "version": version.number,
        "urls": int(total),
        "by_status": by_status,
        "score": {"min": low, "avg": mean, "max": high},
        "hosts": int(hosts),
        "due_now": int(due),
        "links": int(link_count),
        "over_cap": add_over_cap(version.meta.get("over_cap"), {}),
    }


def _status_filter(status: str | None) -> tuple[str, list[str]]:
    if status is None:
        return "", []
    if status not in {str(s) for s in DbStatus}:
        raise UsageError(f"--status {status}: not a status (one of {', '.join(str(s) for s in DbStatus)})")
    return "WHERE status = ?", [status]


def dump_jsonl(cfg: CrawlerConfig, out: TextIO, status: str | None = None) -> int:
    """One JSON object per URL (every page column), sorted by URL, only ``status`` if given; returns the count."""
    where, params = _status_filter(status)
    with _live(cfg) as (_, con, pages, _links):
        written = 0
        for row in iter_dicts(
            con.execute(f"SELECT {json_columns(PAGES)} FROM {pages} {where} ORDER BY url", params), BATCH_ROWS
        ):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            written += 1
        return written


def dump_parquet(cfg: CrawlerConfig, out: Path, status: str | None = None) -> int:
    """All pages (only ``status`` if given) sorted by URL into one Parquet file with the pages schema, atomically."""
    where, params = _status_filter(status)
    if params:
        where = f"WHERE status = '{params[0]}'"  # checked against DbStatus above; COPY takes no parameters
    with _live(cfg) as (_, con, pages, _links):
        return copy_to_parquet(
            con, f"SELECT {typed_columns(PAGES)} FROM {pages} {where} ORDER BY url", Path(out), PAGES
        )


def lookup(cfg: CrawlerConfig, url: str) -> dict[str, Any] | None:
    """The page of ``url`` (normalized first) as in the JSON dump, plus its ``inlinks`` count; None if unknown."""
    try:
        key = Normalizer.from_config(cfg).normalize(url)
    except InvalidUrl as exc:
        raise UsageError(f"{url}: not a valid URL ({exc})") from exc
    with _live(cfg) as (_, con, pages, links):
        rows = list(
            iter_dicts(con.execute(f"SELECT {json_columns(PAGES)} FROM {pages} WHERE url = ?", [key]))
        )
        if not rows:
            return None
        record = rows[0]
        record["inlinks"] = con.execute(f"SELECT count(*) FROM {links} WHERE to_url = ?", [key]).fetchall()[
            0
        ][0]
    return record
