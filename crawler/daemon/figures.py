"""The webdb figures a cycle reports (``/metrics`` gauges, ``cycle.done``): its version, URLs, URLs per status.

Counted by DuckDB on the parts, as readdb's ``db_stats`` would; in a reference
tree (Spark jobs over a bucket) the webdb's parts stay in the bucket, where only
the job engine's executors read them, so the engine counts them there.
"""

from __future__ import annotations

from typing import Any

from crawler.config import CrawlerConfig
from crawler.jobs.engine import DuckEngine, open_engine
from crawler.models import PAGES, DbStatus
from crawler.storage.references import is_reference_tree
from crawler.webdb.store import VersionedStore


def webdb_figures(cfg: CrawlerConfig) -> dict[str, Any]:
    """The live version's number, its URL count and its count per status (every status, zeros too)."""
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    # A Spark engine on local parts would cost a job (seconds on a cluster) for what DuckDB counts in milliseconds.
    con = open_engine(cfg) if is_reference_tree(cfg.crawl_path) else DuckEngine(cfg.jobs)
    try:
        pages = con.source(sorted((version.path / "pages").glob("*.parquet")), PAGES)
        counts = {str(status): int(n) for status, n in con.rows(f"SELECT status, count(*) FROM {pages} GROUP BY status")}
    finally:
        con.close()
    by_status = {str(s): counts.pop(str(s), 0) for s in DbStatus}
    by_status.update(counts)  # a status no code writes: show it anyway
    return {"version": version.number, "urls": sum(by_status.values()), "by_status": by_status}
