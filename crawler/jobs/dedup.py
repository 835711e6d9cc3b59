"""dedup: among fetched pages that share a content digest, keep one and mark the others ``duplicate``.

The page kept in each group is the one with the highest score, then the
shortest URL, then the first URL in sort order (so the choice is stable from
run to run). Pages already marked take part again: when the content of the
page kept earlier changed, the best page still carrying the old digest is the
one kept now and goes back to ``fetched``. ``duplicate`` pages are never
generated (generate skips them), so their next_fetch does not matter.

The job takes the webdb lock and writes a new version only when some status
changes; the links table is hard-linked unchanged. One SQL window over the
pages, as every batch job here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crawler.config import CrawlerConfig
from crawler.errors import StorageError
from crawler.jobs.engine import first_line, open_engine
from crawler.jobs.inject import link_parts
from crawler.jobs.progress import JobProgress
from crawler.jobs.sql import typed_columns
from crawler.models import PAGES, DbStatus
from crawler.segments.layout import part_name
from crawler.webdb.store import VersionedStore

_CANDIDATES = (DbStatus.FETCHED, DbStatus.NOTMODIFIED, DbStatus.DUPLICATE)


@dataclass
class DedupReport:
    version: int
    marked: int
    restored: int


def dedup(cfg: CrawlerConfig, log: Any) -> DedupReport:
    store = VersionedStore(cfg.crawl_path / "webdb")
    with store.lock():
        current = store.require_current()
        con = open_engine(cfg)
        try:
            with JobProgress("dedup", 2, log) as progress:
                progress.step("rank pages by digest")
                pages = con.source(sorted((current.path / "pages").glob("*.parquet")), PAGES)
                candidates = ", ".join(f"'{s}'" for s in _CANDIDATES)
                # Only the pages whose status changes: the rest of the webdb is copied as it is.
                con.create_table("decided", f"""
                    SELECT * FROM (
                        SELECT url, status AS old_status,
                               CASE WHEN rank > 1 THEN '{DbStatus.DUPLICATE}'
                                    WHEN status = '{DbStatus.DUPLICATE}' THEN '{DbStatus.FETCHED}'
                                    ELSE status END AS status
                        FROM (SELECT url, status, row_number() OVER (
                                  PARTITION BY digest ORDER BY score DESC NULLS LAST, length(url), url) AS rank
                              FROM {pages} WHERE status IN ({candidates}) AND digest IS NOT NULL) ranked) d
                    WHERE status <> old_status""")
                marked, restored = con.rows(
                    f"""SELECT count(*) FILTER (WHERE status = '{DbStatus.DUPLICATE}'),
                               count(*) FILTER (WHERE status <> '{DbStatus.DUPLICATE}') FROM decided"""
                )[0]
                if marked or restored:
                    progress.step("write pages")
                    meta = {k: v for k, v in current.meta.items() if k not in ("version", "created")}
                    with store.new_version(meta) as temp:
                        (temp / "pages").mkdir()
                        columns = ", ".join(
                            "coalesce(d.status, p.status) AS status" if name == "status" else f"p.{name}"
                            for name in PAGES.names
                        )
                        query = f"""SELECT {typed_columns(PAGES)} FROM (
                            SELECT {columns} FROM {pages} p LEFT JOIN decided d ON d.url = p.url) marked ORDER BY url"""
                        con.write(query, temp / "pages" / part_name(0), PAGES, single=False)
                        link_parts(current.path / "links", temp / "links")
        except con.errors as exc:
            raise StorageError(f"dedup: {first_line(exc)}") from exc
        finally:
            con.close()
        version = store.require_current().number
    log.info("dedup.done", version=version, marked=int(marked), restored=int(restored))
    return DedupReport(version, int(marked), int(restored))
