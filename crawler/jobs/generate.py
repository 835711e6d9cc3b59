"""generate: pick the best due URLs into a new segment's fetchlist, partitioned by host.

A page is due when its ``next_fetch`` has passed and it is not a duplicate.
Gone pages (404/410, robots-denied, out of retries) are left out until then:
updatedb sets their ``next_fetch`` to the fetch time plus ``db.max_interval``,
so they never come back within the normal refetch interval, and come back once
after that long, as DESIGN 6a asks (a page may return, a robots.txt may
change). URLs already handed out in a fetchlist that no webdb version has
merged yet are left out, so overlapping rounds (a generate while the last
segment is still being fetched) never fetch a URL twice; this reads only the
small fetchlists, never rewriting the webdb. The best ``generate.top_n`` by
score are taken, at most ``generate.max_per_host`` per host, registered domain
or IP (``generate.count_mode``, see ``count_keys.py``).

Each host lands in exactly one partition (first 8 bytes of MD5(host) mod
``generate.partitions``, computed in SQL the same way as
``segments.layout.partition_of``), so one fetch process owns a host and its
politeness. Within a part the hosts are interleaved (every host's best URL,
then every host's second...), so a fetcher reading the part in order keeps
many hosts busy instead of queueing one host's thousand URLs first.

Only the live webdb version is read (CURRENT names a complete one), so no lock
is needed; the fetchlist becomes usable when ``fetchlist/_SUCCESS`` exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from crawler.config import CrawlerConfig
from crawler.errors import StorageError
from crawler.fsutil import remove_tree
from crawler.jobs import traps
from crawler.jobs.count_keys import count_keys
from crawler.jobs.engine import JobEngine, first_line, open_engine
from crawler.jobs.progress import JobProgress
from crawler.jobs.sql import md5_prefix_sql, sql_literal, typed_columns, utc_naive
from crawler.models import FETCHLIST, PAGES, DbStatus
from crawler.segments.layout import Segment, create_segment, list_segments, part_name
from crawler.webdb.store import Version, VersionedStore


@dataclass
class GenerateReport:
    segment: Segment | None
    selected: int
    partitions: int


def partition_sql(host: str, partitions: int, host_hash: str | None = None) -> str:
    """SQL for a host's partition: first 8 bytes of MD5(host), unsigned big-endian, mod ``partitions``.

    ``host_hash``: a column already holding ``md5(host)``.
    """
    return md5_prefix_sql(host_hash or f"md5({host})", 16, partitions)


def pending_fetchlists(segments_dir: Path, merged: list[str]) -> list[Path]:
    """Fetchlist parts of finished generates whose segment the live version has not merged yet."""
    done = set(merged)
    parts: list[Path] = []
    for seg in list_segments(segments_dir):
        if seg.name not in done and seg.is_done("fetchlist"):
            parts.extend(seg.parts("fetchlist"))
    return parts


def generate(cfg: CrawlerConfig, log: Any, now: datetime | None = None, *,
             exclude_hosts: set[str] | None = None, exclude_urls: list[str] | None = None) -> GenerateReport:
    """``exclude_hosts``: hosts left out, e.g. those a running fetch still holds (the daemon's overlap);
    ``exclude_urls``: URLs left out, e.g. redirect targets a running fetch took (not in any fetchlist)."""
    store = VersionedStore(cfg.crawl_path / "webdb")
    version = store.require_current()
    segments_dir = cfg.crawl_path / "segments"
    con = open_engine(cfg)
    try:
        with JobProgress("generate", 3, log) as progress:
            per_partition = _select(con, cfg, version, segments_dir, now, progress, exclude_hosts, exclude_urls)
            selected = sum(per_partition.values())
            if not selected:
                log.info("generate.empty", version=version.number)
                return GenerateReport(None, 0, 0)
            progress.step("write fetchlist")
            segment, used = _write_fetchlist(con, segments_dir, sorted(per_partition))
    except con.errors as exc:
        raise StorageError(f"generate: {first_line(exc)}") from exc
    finally:
        con.close()
    log.info("generate.done", segment=str(segment.path), selected=selected, partitions=len(used))
    return GenerateReport(segment, selected, len(used))


def _select(
    con: JobEngine,
    cfg: CrawlerConfig,
    version: Version,
    segments_dir: Path,
    now: datetime | None,
    progress: JobProgress,
    exclude_hosts: set[str] | None = None,
    exclude_urls: list[str] | None = None,
) -> dict[int, int]:
    """Table ``selected``: the fetchlist entries with partition and ordering columns; returns their count by partition."""
    gen = cfg.generate
    pages = con.source(sorted((version.path / "pages").glob("*.parquet")), PAGES)
    handed_out = con.source(pending_fetchlists(segments_dir, version.merged_segments), FETCHLIST)
    per_key = f"WHERE key_rank <= {int(gen.max_per_host)}" if gen.max_per_host else ""
    keys_join, count_key = "", "p.host"
    if gen.max_per_host and gen.count_mode != "host":
        progress.step(f"map hosts to {gen.count_mode}")
        hosts = [row[0] for row in con.rows(f"SELECT DISTINCT host FROM {pages}")]
        con.register("host_keys", pa.table({"host": hosts, "count_key": count_keys(hosts, cfg)}))
        keys_join, count_key = "LEFT JOIN host_keys k ON k.host = p.host", "coalesce(k.count_key, p.host)"
    excluded = ""
    if exclude_hosts:
        con.register("excluded_hosts", pa.table({"host": sorted(exclude_hosts)}, schema=pa.schema([PAGES.field("host")])))
        excluded = "AND p.host NOT IN (SELECT host FROM excluded_hosts)"
    if exclude_urls:
        con.register("excluded_urls", pa.table({"url": exclude_urls}, schema=pa.schema([PAGES.field("url")])))
        excluded += " AND p.url NOT IN (SELECT url FROM excluded_urls)"
    excluded += traps.generate_exclusion(con, cfg, version)  # unfetched URLs growing a suspected spider trap
    progress.step("select due pages")
    con.create_table(
        "selected",
        f"""WITH due AS (
            SELECT p.*, {count_key} AS count_key FROM {pages} p {keys_join}
            WHERE p.next_fetch <= {sql_literal(utc_naive(now))} AND p.status <> '{DbStatus.DUPLICATE}'
              AND NOT EXISTS (SELECT 1 FROM {handed_out} h WHERE h.url = p.url) {excluded}
        ),
        keyed AS (
            SELECT *, row_number() OVER (PARTITION BY count_key ORDER BY score DESC, url) AS key_rank FROM due
        ),
        top AS (
            SELECT * FROM keyed {per_key} ORDER BY score DESC, url LIMIT {int(gen.top_n)}
        ),
        ranked AS (
            SELECT *, row_number() OVER (PARTITION BY host ORDER BY score DESC, url) AS host_rank FROM top
        )
        SELECT *, {partition_sql("host", gen.partitions, "host_hash")} AS partition
        FROM (SELECT *, status AS db_status, md5(host) AS host_hash FROM ranked) hashed""",
    )
    # The count and the partitions used in one statement: on a small webdb planning one costs more than running it.
    return {int(p): int(n) for p, n in con.rows("SELECT partition, count(*) FROM selected GROUP BY partition")}


def _write_fetchlist(con: JobEngine, segments_dir: Path, used: list[int]) -> tuple[Segment, list[int]]:
    """A new segment with one fetchlist part per partition in ``used``, hosts interleaved within each."""
    segment = create_segment(segments_dir)
    try:
        folder = segment.dir("fetchlist")
        folder.mkdir()
        for p in used:
            con.write(
                f"SELECT {typed_columns(FETCHLIST)} FROM selected WHERE partition = {int(p)}"
                " ORDER BY host_rank, host_hash, url",
                folder / part_name(p),
                FETCHLIST,
            )
        segment.mark_done("fetchlist")
    except BaseException:
        remove_tree(segment.path)
        raise
    return segment, used
