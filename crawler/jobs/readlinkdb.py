"""readlinkdb: one URL's inlinks, or every URL's, from the live link database version.

A record is ``{"url": ..., "inlinks": [{"from_url": ..., "anchor": ...}, ...]}``,
inlinks sorted by source URL; a dump is one record per linked URL, sorted by URL.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

import duckdb

from crawler.config import CrawlerConfig
from crawler.errors import UsageError, WebDbError
from crawler.jobs.engine import connect, iter_dicts, parquet_source
from crawler.jobs.invertlinks import inlink_parts, linkdb_store
from crawler.models import INLINKS
from crawler.urls.normalize import InvalidUrl, Normalizer

_GROUPED = """SELECT to_url AS url, list({{'from_url': from_url, 'anchor': anchor}} ORDER BY from_url) AS inlinks
              FROM {source} {where} GROUP BY to_url"""


def _source(cfg: CrawlerConfig) -> tuple[str, str]:
    version = linkdb_store(cfg).current()
    if version is None:
        raise WebDbError(f"{cfg.crawl_path / 'linkdb'}: no link database yet (run `crawler invertlinks` first)")
    return str(version.path), parquet_source(inlink_parts(version), INLINKS)


def inlinks_of(cfg: CrawlerConfig, url: str) -> dict[str, Any]:
    """The record of ``url`` (normalized first); a URL nothing links to has an empty inlinks list."""
    try:
        key = Normalizer.from_config(cfg).normalize(url)
    except InvalidUrl as exc:
        raise UsageError(f"{url}: not a valid URL ({exc})") from exc
    where, source = _source(cfg)
    con = connect(cfg.jobs)
    try:
        rows = list(iter_dicts(con.execute(_GROUPED.format(source=source, where="WHERE to_url = ?"), [key])))
    except duckdb.Error as exc:
        raise WebDbError(f"{where}: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()
    return rows[0] if rows else {"url": key, "inlinks": []}


def dump_linkdb(cfg: CrawlerConfig, out: TextIO) -> int:
    """One record per URL with inlinks, sorted by URL; returns the number written."""
    where, source = _source(cfg)
    con = connect(cfg.jobs)
    written = 0
    try:
        query = _GROUPED.format(source=source, where="") + " ORDER BY url"
        for row in iter_dicts(con.execute(query)):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            written += 1
    except duckdb.Error as exc:
        raise WebDbError(f"{where}: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()
    return written
