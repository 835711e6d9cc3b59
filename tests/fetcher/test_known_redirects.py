"""Redirect hops to pages the webdb has as fetched and not due are recorded, not fetched again."""

from __future__ import annotations

from array import array
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from crawler.devserver import SiteServer
from crawler.fetcher.known import KnownFetched, load_known_fetched, url_hash
from crawler.log import get_logger
from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler
from tests.fetcher.conftest import make_cfg


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]


def _site(root: Path) -> Path:
    root.mkdir()
    (root / "a.html").write_text('<html><body><a href="/moved-a">x</a> <a href="/moved-b">y</a></body></html>')
    (root / "b.html").write_text("<html><body>b</body></html>")
    (root / "_redirects").write_text("/moved-a /a.html 301\n/moved-b /b.html 301\n")
    return root


def _fetcher_rows(crawl_dir: Path) -> dict[str, dict]:
    rows = {}
    for part in sorted((crawl_dir / "segments").glob("*/fetcher/part-*.parquet")):
        for row in pq.read_table(part).to_pylist():
            rows.setdefault(row["url"], row)
    return rows


async def test_redirect_to_a_page_fetched_a_round_earlier_is_not_requested(tmp_path, crawl_args):
    """A hop to a page fetched in an earlier round is recorded with its reason and not requested; a new target is."""
    async with SiteServer(_site(tmp_path / "site"), "127.0.0.1", 0) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(site.url("/a.html") + "\n")
        result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "3", *crawl_args)
        assert result.code == 0, result.stderr
        assert site.paths().count("/a.html") == 1
        assert site.paths().count("/b.html") == 1
    rows = _fetcher_rows(tmp_path)
    moved_a = rows[site.url("/moved-a")]
    assert moved_a["redirect_url"] == site.url("/a.html")
    assert "not followed: redirect target fetched in an earlier round and not due" in moved_a["reason"]
    assert rows[site.url("/b.html")]["redirect_source"] == site.url("/moved-b")
    dump = await run_crawler("readdb", "--url", site.url("/a.html"), *crawl_args)
    assert '"fetched"' in dump.stdout, dump.stdout + dump.stderr


def test_known_hashes_match_duckdb_and_probe(tmp_path):
    """Without a webdb nothing is known; hashes match DuckDB's md5_number low 64 bits and probe by binary search."""
    cfg = make_cfg(tmp_path)
    assert len(load_known_fetched(cfg, [tmp_path / "none.parquet"], get_logger())) == 0
    urls = ["http://a.test/1", "http://a.test/2", "http://b.test/%C3%A9"]
    known = KnownFetched(array("Q", sorted(url_hash(u) for u in urls[:2])))
    assert urls[0] in known and urls[1] in known and urls[2] not in known
    low = duckdb.sql(f"SELECT (md5_number('{urls[2]}') & 18446744073709551615::UHUGEINT)::UBIGINT").fetchall()[0][0]
    assert low == url_hash(urls[2])


@pytest.mark.parametrize(("offset", "length"), [(0, 0), (0, 1), (0, 13), (3, 17), (8, 8), (5, 300)])
def test_the_not_due_hashes_are_the_flagged_ones_of_a_batch(offset, length):
    """The hashes kept as not due are exactly those whose flag is true, in order, for Arrow arrays that are
    slices (an offset into their buffers, bit-packed flags not starting on a byte)."""
    import pyarrow as pa

    from crawler.fetcher.known import _extend_where

    values = [(i * 0x9E3779B97F4A7C15) % 2**64 for i in range(offset + length + 5)]
    flags = [i % 3 != 1 for i in range(offset + length + 5)]
    column = pa.array(values, pa.uint64()).slice(offset, length)
    keep = pa.array(flags, pa.bool_()).slice(offset, length)
    got = array("Q")
    _extend_where(got, column, keep)
    assert list(got) == [v for v, f in zip(values[offset:offset + length], flags[offset:offset + length],
                                            strict=True) if f]
