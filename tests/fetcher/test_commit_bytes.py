"""fetcher.commit_bytes: a part is committed once the buffered bodies, page text and outlinks reach the
limit, whatever commit_records says, so the pages held in memory are bounded by size, not by count."""

from __future__ import annotations

import contextlib
import gzip

import pyarrow.parquet as pq
import pytest
import structlog
from aiohttp import web

from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.records import fetch_row
from crawler.fetcher.service import fetch_segment
from crawler.models import FetchStatus
from crawler.protocols.base import Response
from crawler.segments.writer import PartitionWriter
from tests.fetcher.conftest import make_cfg, make_segment, page, read_rows

# ~20 kB of body and ~10 kB of text a page.
BODY = "<html><body>" + "".join(f"<p>word{i} " * 50 + "</p><!-- " + "x" * 200 + " -->" for i in range(20)) + "</body></html>"


async def _fetch_twelve(tmp_path, servers, handler, bound: str, processes: int):
    """Fetch 12 pages served by ``handler`` under ``fetcher.commit_bytes=bound``; the segment, its URLs
    and the rows of each fetcher part."""
    site = await servers("127.0.0.1", {f"/p{n}": handler for n in range(12)})
    urls = [site.url(f"/p{n}") for n in range(12)]
    cfg = make_cfg(tmp_path, "fetcher.commit_records=1000", f"fetcher.commit_bytes={bound}",
                   f"fetcher.parse_processes={processes}", "fetcher.per_host_concurrency=1")
    seg = make_segment(tmp_path, urls)
    with ParsePool(cfg, processes) if processes else contextlib.nullcontext() as pool:
        report = await fetch_segment(cfg, seg, structlog.get_logger(), parse_pool=pool)
    assert not report.stopped
    return seg, urls, [pq.read_metadata(p).num_rows for p in seg.parts("fetcher")]


@pytest.mark.parametrize("processes", [0, 1])
async def test_parts_are_cut_by_buffered_bytes(tmp_path, servers, processes):
    # Three pages' body and text are ~90 kB: a part every three or four pages, never one for all twelve.
    seg, urls, sizes = await _fetch_twelve(tmp_path, servers, page(BODY), "80KB", processes)
    # commit_records alone would make one part; the pages fetched while a part is written join the next.
    assert sum(sizes) == 12 and len(sizes) >= 2, sizes
    assert sorted(r["url"] for r in read_rows(seg, "parse_text")) == sorted(urls)


def _gzipped(text: str):
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=gzip.compress(text.encode()), content_type="text/html",
                            headers={"Content-Encoding": "gzip"})

    return handler


@pytest.mark.parametrize("processes", [0, 1])
async def test_the_text_of_gzip_served_pages_counts_too(tmp_path, servers, processes):
    """A gzip-served page is ~1 kB as served and ~10 kB of text: held until the commit (in the fetch
    process, or in the pool's writer), the text counts against the bound as well as the body."""
    _seg, _urls, sizes = await _fetch_twelve(tmp_path, servers, _gzipped(BODY), "25KB", processes)
    # The bodies alone (~12 kB) would make one part. (The pages answered while a part is written join
    # the next one, up to one a worker: the bound is where a worker starts to wait, not a hard cap.)
    assert sum(sizes) == 12 and len(sizes) >= 2, sizes


async def test_a_part_holds_what_reaches_the_bound(tmp_path):
    """Added one at a time, 20 kB bodies with 10 kB of text make a part every two pages under a 50 kB bound."""
    seg = make_segment(tmp_path, [f"http://127.0.0.1/p{n}" for n in range(9)])
    writer = PartitionWriter(seg, 0, commit_records=1000, commit_interval=600, commit_bytes=50_000)
    for n in range(9):
        entry = {"url": f"http://127.0.0.1/p{n}", "host": "127.0.0.1", "partition": 0, "score": 1.0,
                 "db_status": "unfetched", "retries": 0}
        response = Response(entry["url"], 200, "OK", [("Content-Type", "text/html")], b"x" * 20_000, b"x" * 20_000)
        writer.add(fetch_row(entry, FetchStatus.SUCCESS, reason="200 OK", response=response), response,
                   parse_text={"url": entry["url"], "text": "y" * 10_000})
        await writer.commit_if_due()
    await writer.commit()
    assert [pq.read_metadata(p).num_rows for p in seg.parts("fetcher")] == [2, 2, 2, 2, 1]


def test_commit_bytes_is_a_size(tmp_path):
    assert make_cfg(tmp_path).fetcher.commit_bytes == 8 * 1024 * 1024
    assert make_cfg(tmp_path, "fetcher.commit_bytes=1MiB").fetcher.commit_bytes == 1024 * 1024
    with pytest.raises(Exception, match="commit_bytes"):
        make_cfg(tmp_path, "fetcher.commit_bytes=0")


# ~1 kB of text and 200 outlinks a page: what the writer holds of it is mostly the links.
LINKS = "<html><body><p>" + "word " * 200 + "</p>" + "".join(
    f"<a href='/link/{i}/a-long-enough-path.html'>anchor {i}</a>" for i in range(200)) + "</body></html>"


@pytest.mark.parametrize("processes", [0, 1])
async def test_the_outlinks_held_count_too(tmp_path, servers, processes):
    """A page of ~1 kB of text and 200 outlinks holds ~40 kB of link strings and tuples until the commit;
    counted, a 100 kB bound cuts twelve such pages into parts. Counting its ~11 kB body and its text only
    (~12 kB a page, 144 kB for all twelve) would have cut them once at most."""
    seg, urls, sizes = await _fetch_twelve(tmp_path, servers, page(LINKS), "100KB", processes)
    assert sum(sizes) == 12 and len(sizes) >= 3, sizes
    data = read_rows(seg, "parse_data")
    assert sorted(r["url"] for r in data) == sorted(urls) and all(len(r["outlinks"]) == 200 for r in data)
