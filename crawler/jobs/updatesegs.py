"""updatesegs: write the databases' view of each fetched URL back into its segment (Nutch's UpdateSegmentsFromDb).

Every fetcher record gets two more columns: ``score``, the URL's score in the
live webdb version, and ``anchors``, the distinct non-empty anchor texts of its
inlinks in the live linkdb version (null where a database has no entry), so a
segment carries what an indexer needs without the databases.

The new ``fetcher/`` is written next to the old one under a temporary name,
part for part with the same names (fetch resume and partition numbering keep
working), then the two folders are swapped: atomically with Linux's
``renameat2(RENAME_EXCHANGE)``, else by two renames whose gap the next run
repairs. The old folder is deleted only after the swap, so a reader or a killed
job always finds one complete ``fetcher/``. Running it again rewrites the
columns from the databases as they are then.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from crawler.config import CrawlerConfig
from crawler.errors import StorageError
from crawler.fsutil import TEMP_PREFIX, atomic_write_text, remove_tree, swap_dirs
from crawler.jobs.engine import JobEngine, first_line, open_engine
from crawler.jobs.invertlinks import inlink_parts, linkdb_store
from crawler.jobs.progress import JobProgress
from crawler.jobs.sql import typed_columns
from crawler.models import FETCHER, FETCHER_UPDATED, INLINKS, PAGES
from crawler.segments.layout import SUCCESS, Segment, require_fetched
from crawler.webdb.store import Version, VersionedStore, exclusive_lock

_NEW, _OLD = f"{TEMP_PREFIX}fetcher-new", f"{TEMP_PREFIX}fetcher-old"


@dataclass
class UpdateSegsReport:
    segments: list[str]
    records: int


def _repair(seg: Segment) -> None:
    """Undo what a killed run left: a parked old fetcher/ goes back, temp folders go."""
    leftovers = sorted(seg.path.glob(f"{TEMP_PREFIX}fetcher-*"))
    if not seg.dir("fetcher").exists():
        parked = [p for p in leftovers if p.name.startswith(_OLD)]
        if parked:
            os.rename(parked[0], seg.dir("fetcher"))
            leftovers.remove(parked[0])
    for path in leftovers:
        remove_tree(path)


def updatesegs(cfg: CrawlerConfig, segments: list[Segment], log: Any) -> UpdateSegsReport:
    webdb = VersionedStore(cfg.crawl_path / "webdb").require_current()
    linkdb = linkdb_store(cfg).current()
    total = 0
    for seg in segments:
        with exclusive_lock(seg.path / ".lock", str(seg.path)):
            _repair(seg)
            require_fetched(seg)
            con = open_engine(cfg)
            try:
                with JobProgress("updatesegs", 2, log) as progress:
                    records = _rewrite(con, seg, webdb, linkdb, progress)
            except con.errors as exc:
                raise StorageError(f"updatesegs: {seg.path}: {first_line(exc)}") from exc
            finally:
                con.close()
        log.info("updatesegs.segment", segment=seg.name, records=records, webdb=webdb.number,
                 linkdb=linkdb.number if linkdb else None)
        total += records
    log.info("updatesegs.done", segments=[s.name for s in segments], records=total)
    return UpdateSegsReport([s.name for s in segments], total)


def _rewrite(
    con: JobEngine, seg: Segment, webdb: Version, linkdb: Version | None, progress: JobProgress
) -> int:
    parts = seg.parts("fetcher")
    progress.step("look up scores and anchors")
    pages = con.source(sorted((webdb.path / "pages").glob("*.parquet")), PAGES)
    inlinks = con.source(inlink_parts(linkdb), INLINKS)
    con.create_table("urls", f"SELECT DISTINCT url FROM {con.source(parts, FETCHER)}")
    # Empty anchors are dropped before grouping: a URL with only empty ones has no row, so NULL.
    con.create_table("known", f"""
        SELECT u.url, p.score, a.anchors FROM urls u
        LEFT JOIN (SELECT url, score FROM {pages}) p ON p.url = u.url
        LEFT JOIN (SELECT to_url, list_sort(list_distinct(list(anchor))) AS anchors
                   FROM {inlinks} WHERE anchor <> '' AND to_url IN (SELECT url FROM urls) GROUP BY to_url) a
          ON a.to_url = u.url""")
    progress.step("write fetcher parts")
    new = seg.path / f"{_NEW}.{os.getpid()}"
    new.mkdir()
    try:
        records = 0
        for part in parts:
            query = f"""SELECT {typed_columns(FETCHER_UPDATED)} FROM (
                SELECT f.*, k.score, k.anchors
                FROM {con.source([part], FETCHER)} f LEFT JOIN known k ON k.url = f.url) updated"""
            records += con.write(query, new / part.name, FETCHER_UPDATED)
        atomic_write_text(new / SUCCESS, "")
        swap_dirs(new, seg.dir("fetcher"))
    finally:
        remove_tree(new)
    return records
