from __future__ import annotations

import io
import json
from datetime import datetime

import pyarrow.parquet as pq
import pytest

from crawler.errors import UsageError, WebDbError
from crawler.jobs.readdb import db_stats, dump_jsonl, dump_parquet, lookup
from crawler.models import PAGES, DbStatus

from .conftest import page, write_db

A, B, C = "http://a.example/", "http://b.example/x", "http://c.example/"


@pytest.fixture
def db(cfg):
    write_db(
        cfg,
        [
            page(C, score=0.5),
            page(
                A,
                status="fetched",
                score=3.0,
                fetch_time=datetime(2026, 11, 29, 19, 45),
                digest="f" * 32,
                next_fetch=datetime(2026, 12, 29, 19, 45, 0, 250_000),
                http_status=200,
                num_outlinks=2,
            ),
            page(B, status="gone", score=1.0, retries=2),
        ],
        links=[
            {"from_url": A, "to_url": B, "anchor": "b"},
            {"from_url": C, "to_url": B, "anchor": None},
            {"from_url": B, "to_url": A, "anchor": "a"},
        ],
    )
    return cfg


def test_stats(db):
    """Stats give the version, URL count, a count for every status (zeros too), score range and link count."""
    stats = db_stats(db)
    assert stats["version"] == 1 and stats["urls"] == 3 and stats["links"] == 3
    assert stats["by_status"] == {str(s): 0 for s in DbStatus} | {"unfetched": 1, "fetched": 1, "gone": 1}
    assert stats["score"] == {"min": 0.5, "avg": pytest.approx(1.5), "max": 3.0}


def test_dump_jsonl_sorted_with_iso_times(db):
    """The JSON dump has one object per URL, sorted by URL, with every page column and ISO UTC times."""
    out = io.StringIO()
    assert dump_jsonl(db, out) == 3
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["url"] for r in rows] == [A, B, C]
    assert all(list(r) == PAGES.names for r in rows)
    assert rows[0]["fetch_time"] == "2026-11-29T19:45:00Z"
    assert rows[0]["next_fetch"] == "2026-12-29T19:45:00Z"
    assert (rows[0]["status"], rows[0]["digest"], rows[0]["score"]) == ("fetched", "f" * 32, 3.0)
    assert rows[1]["retries"] == 2 and rows[2]["fetch_time"] is None


def test_dump_parquet(db, tmp_path):
    """The Parquet dump is one file with the pages schema sorted by URL, and no temp file is left."""
    out = tmp_path / "dump" / "pages.parquet"
    out.parent.mkdir()
    assert dump_parquet(db, out) == 3
    table = pq.read_table(out)
    assert table.schema.equals(PAGES)
    assert table.column("url").to_pylist() == [A, B, C]
    assert [p.name for p in out.parent.iterdir()] == ["pages.parquet"]


def test_lookup_normalizes_and_counts_inlinks(db):
    """Looking up a URL normalizes it first and adds its inlink count; an unknown URL gives None."""
    record = lookup(db, "HTTP://B.Example:80/x#top")
    assert record is not None and record["url"] == B and record["status"] == "gone"
    assert record["inlinks"] == 2
    assert lookup(db, "http://unknown.example/") is None


def test_lookup_rejects_invalid_url(db):
    """A lookup of something that is not a URL is a usage error, not a crash."""
    with pytest.raises(UsageError):
        lookup(db, "ftp://a.example/")


def test_no_db_is_an_error(cfg):
    """Every reader raises WebDbError when there is no crawl database."""
    with pytest.raises(WebDbError):
        db_stats(cfg)
    with pytest.raises(WebDbError):
        dump_jsonl(cfg, io.StringIO())


def test_stats_count_hosts_and_pages_due_now(db):
    """Stats count distinct hosts and the pages due at the given time (duplicates never are)."""
    stats = db_stats(db, now=datetime(2026, 6, 1))
    assert (stats["hosts"], stats["due_now"]) == (3, 2)
    assert db_stats(db, now=datetime(2027, 1, 1))["due_now"] == 3


def test_dump_only_one_status(db, tmp_path):
    """--dump --status S dumps only the pages in status S, as JSON lines or Parquet; an unknown status is refused."""
    out = io.StringIO()
    assert dump_jsonl(db, out, status="gone") == 1
    assert json.loads(out.getvalue())["url"] == B
    assert dump_parquet(db, tmp_path / "f.parquet", status="fetched") == 1
    with pytest.raises(UsageError, match="not a status"):
        dump_jsonl(db, io.StringIO(), status="bogus")
