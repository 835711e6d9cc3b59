"""Right after a generate: when the next URL comes due, and which left-out hosts have due URLs.

These bound when the same generate could find something new with nothing else
changed: the time passing the earliest ``next_fetch`` still ahead, or a busy
host with due URLs being freed. A host freed with nothing due cannot change
the answer, so the daemon does not generate for it (the tail of a fetch frees
its hosts one by one). Due URLs of hosts nobody holds (``generate.top_n`` cut
them) mean the next generate finds something as soon as it may run. One query
over the live version's pages; the few fetchlists not merged yet (the new
segment's among them) are read as generate reads them.
"""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa

from crawler.config import CrawlerConfig
from crawler.daemon.wake import Outlook
from crawler.errors import StorageError
from crawler.jobs.engine import first_line, open_engine, sql_literal
from crawler.jobs.generate import pending_fetchlists
from crawler.models import FETCHLIST, PAGES, DbStatus
from crawler.segments.layout import Segment
from crawler.webdb.store import VersionedStore


def webdb_outlook(cfg: CrawlerConfig, now: datetime, excluded: set[str], hops: set[str],
                  segment: Segment | None = None) -> Outlook:
    """``now``: the one generate used; ``excluded``: the hosts it left out (busy in a running fetch); ``hops``: the
    URLs it left out (redirect targets a running fetch took); ``segment``: the one it generated, whose hosts are
    busy from now on too."""
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    con = open_engine(cfg)
    try:
        pages = con.source(sorted((version.path / "pages").glob("*.parquet")), PAGES)
        handed_out = con.source(pending_fetchlists(cfg.crawl_path / "segments", version.merged_segments), FETCHLIST)
        if segment is not None:  # read by the engine: staged by reference, the parts name objects in the bucket
            listed = con.source(segment.parts("fetchlist"), FETCHLIST)
            excluded = excluded | {row[0] for row in con.rows(f"SELECT DISTINCT host FROM {listed}")}
        when = sql_literal(now)
        live = f"p.status <> '{DbStatus.DUPLICATE}'"
        next_due = con.rows(f"SELECT min(p.next_fetch) FROM {pages} p WHERE p.next_fetch > {when} AND {live}")[0][0]
        con.register("outlook_hosts", pa.table({"host": sorted(excluded)}, schema=pa.schema([PAGES.field("host")])))
        con.register("outlook_urls", pa.table({"url": sorted(hops)}, schema=pa.schema([PAGES.field("url")])))
        due = f"""p.next_fetch <= {when} AND {live}
            AND NOT EXISTS (SELECT 1 FROM {handed_out} h WHERE h.url = p.url)
            AND p.url NOT IN (SELECT url FROM outlook_urls)"""
        # Neither query materializes the due pages: a backlog of millions would cost what generate does.
        waiting = frozenset(row[0] for row in con.rows(
            f"SELECT DISTINCT p.host FROM {pages} p JOIN outlook_hosts e ON e.host = p.host WHERE {due}"))
        more = bool(con.rows(
            f"SELECT 1 FROM {pages} p WHERE p.host NOT IN (SELECT host FROM outlook_hosts) AND {due} LIMIT 1"))
    except con.errors as exc:
        raise StorageError(f"daemon outlook: {first_line(exc)}") from exc
    finally:
        con.close()
    return Outlook(version.number, next_due, waiting, more)
