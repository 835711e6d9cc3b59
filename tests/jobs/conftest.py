"""Fixture data for the job tests: webdb versions and segment parts written with the real schemas."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crawler.config import CrawlerConfig
from crawler.models import FETCHER, FETCHLIST, LINKS, PAGES, PARSE_DATA, PARSE_TEXT
from crawler.segments.layout import Segment, part_name, partition_of
from crawler.urls.normalize import host_of
from crawler.webdb.store import VersionedStore

T0 = datetime(2026, 1, 1)  # fixture clock: pages due at T0
T1 = T0 + timedelta(hours=1)  # fetch time of the fixture fetch records
NOW = T0 + timedelta(hours=2)  # "now" handed to the jobs


def make_cfg(tmp_path: Path, **sections: dict[str, Any]) -> CrawlerConfig:
    return CrawlerConfig.model_validate({"crawl_dir": str(tmp_path), **sections})


@pytest.fixture
def cfg(tmp_path: Path) -> CrawlerConfig:
    return make_cfg(tmp_path)


def page(url: str, **fields: Any) -> dict[str, Any]:
    row = {
        "url": url,
        "host": host_of(url),
        "status": "unfetched",
        "next_fetch": T0,
        "retries": 0,
        "fetch_interval": 86400.0,
        "score": 1.0,
    }
    row.update(fields)
    return row


def write_parquet(path: Path, schema: pa.Schema, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def write_db(
    cfg: CrawlerConfig,
    pages: list[dict[str, Any]],
    links: list[dict[str, Any]] = (),
    merged: list[str] = (),
) -> int:
    """A new live webdb version holding exactly these pages and links; returns its number."""
    store = VersionedStore(cfg.crawl_path / "webdb")
    with store.lock(), store.new_version({"merged_segments": list(merged)}) as temp:
        write_parquet(temp / "pages" / part_name(0), PAGES, pages)
        write_parquet(temp / "links" / part_name(0), LINKS, list(links))
    return store.require_current().number


def read_pages(cfg: CrawlerConfig) -> dict[str, dict[str, Any]]:
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    table = pq.read_table(version.path / "pages", schema=PAGES)
    return {row["url"]: row for row in table.to_pylist()}


def read_links(cfg: CrawlerConfig) -> list[tuple[str, str, str | None]]:
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    table = pq.read_table(version.path / "links", schema=LINKS)
    return sorted((r["from_url"], r["to_url"], r["anchor"]) for r in table.to_pylist())


def fetch(url: str, status: str = "success", **fields: Any) -> dict[str, Any]:
    http = {"success": 200, "notmodified": 304, "redirect_perm": 301, "redirect_temp": 302, "gone": 404}
    row = {
        "url": url,
        "host": host_of(url),
        "status": status,
        "http_status": http.get(status),
        "fetch_time": T1,
        "content_type": "text/html" if status == "success" else None,
        "digest": "0" * 32 if status == "success" else None,
    }
    row.update(fields)
    return row


def parse(url: str, links: list[tuple[str, str]] = (), **fields: Any) -> dict[str, Any]:
    row = {
        "url": url,
        "parse_status": "success",
        "title": f"title of {url}",
        "outlinks": [{"url": u, "anchor": a} for u, a in links],
        "metadata": [],
    }
    row.update(fields)
    return row


MakeSegment = Callable[..., Segment]


@pytest.fixture
def make_segment(cfg: CrawlerConfig) -> MakeSegment:
    """Write segments/<name>/ with a fetchlist and, when given, fetcher / parse_data / parse_text parts."""

    def make(
        name: str,
        fetched: list[dict[str, Any]] | None = None,
        parsed: list[dict[str, Any]] | None = None,
        texts: list[dict[str, Any]] | None = None,
        fetch_done: bool = True,
        fetchlist: list[str] | None = None,
    ) -> Segment:
        seg = Segment(cfg.crawl_path / "segments" / name)
        urls = fetchlist if fetchlist is not None else [r["url"] for r in fetched or []]
        entries = [
            {
                "url": u,
                "host": host_of(u),
                "partition": partition_of(host_of(u), 1),
                "score": 1.0,
                "db_status": "unfetched",
                "retries": 0,
            }
            for u in urls
        ]
        write_parquet(seg.dir("fetchlist") / part_name(0), FETCHLIST, entries)
        seg.mark_done("fetchlist")
        if fetched is not None:
            write_parquet(seg.dir("fetcher") / part_name(0, 0), FETCHER, fetched)
            if fetch_done:
                seg.mark_done("fetcher")
        if parsed is not None:
            write_parquet(seg.dir("parse_data") / part_name(0, 0), PARSE_DATA, parsed)
            seg.mark_done("parse_data")
        if texts is not None:
            write_parquet(seg.dir("parse_text") / part_name(0, 0), PARSE_TEXT, texts)
            seg.mark_done("parse_text")
        return seg

    return make
