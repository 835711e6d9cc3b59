"""`crawler parse SEGMENT`: re-parse fetched content from the segment's WARC files, swapped in whole."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from aiohttp import web

from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]


def _rows(segment: Path, output: str) -> list[dict]:
    rows = [
        r
        for part in sorted((segment / output).glob("part-*.parquet"))
        for r in pq.read_table(part).to_pylist()
    ]
    for row in rows:
        if "metadata" in row:
            row["metadata"] = dict(row["metadata"])
    return sorted(rows, key=lambda r: r["url"])


async def _crawl_one_round(tmp_path: Path, seeds: list[str], crawl_args: list[str], *extra: str) -> Path:
    seed_file = tmp_path / "seeds.txt"
    seed_file.write_text("".join(f"{url}\n" for url in seeds))
    result = await run_crawler("crawl", "--seeds", str(seed_file), "--rounds", "1", *crawl_args, *extra)
    assert result.code == 0, result.stderr[-2000:]
    return Path(result.stdout.split()[-1])


SITEMAP = (
    b'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    b"<url><loc>/from-sitemap</loc><lastmod>2026-11-01</lastmod><priority>0.9</priority></url></urlset>"
)


@pytest.fixture
async def mixed_site():
    """Pages that exercise the dispatch end to end: gzip encoding, X-Robots-Tag, lying types, a gzip sitemap."""

    async def gzipped_page(request: web.Request) -> web.Response:
        body = gzip.compress("<title>Café gzip</title><a href='/next'>next</a>".encode("cp1252"))
        return web.Response(
            body=body, headers={"Content-Type": "text/html; charset=windows-1252", "Content-Encoding": "gzip"}
        )

    async def x_robots(request: web.Request) -> web.Response:
        return web.Response(
            body=b"<title>Hidden</title><a href='/secret'>s</a>",
            headers={"Content-Type": "text/html", "X-Robots-Tag": "noindex, nofollow"},
        )

    async def png_as_html(request: web.Request) -> web.Response:
        return web.Response(
            body=b"\x89PNG\r\n\x1a\n" + bytes(range(256)), headers={"Content-Type": "text/html"}
        )

    async def html_as_text(request: web.Request) -> web.Response:
        return web.Response(
            body=b"<!DOCTYPE html><title>Sniffed</title><a href=/x>x</a>",
            headers={"Content-Type": "text/plain"},
        )

    async def sitemap_gz(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(SITEMAP), headers={"Content-Type": "application/x-gzip"})

    app = web.Application()
    app.router.add_get("/gzip", gzipped_page)
    app.router.add_get("/x-robots", x_robots)
    app.router.add_get("/png", png_as_html)
    app.router.add_get("/text", html_as_text)
    app.router.add_get("/sitemap.xml.gz", sitemap_gz)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


class TestReparse:
    async def test_reproduces_the_fetch_time_parse(self, tmp_path, demo_site, crawl_args):
        """Re-parsing (in a process pool, many parts) gives exactly the rows the fetcher's own parse wrote."""
        args = [*crawl_args, "-D", "fetcher.commit_records=2"]
        segment = await _crawl_one_round(tmp_path, [demo_site.url("/")], args)
        segment = await _crawl_one_round(tmp_path, [], args)  # round 2: the pages the home page links to
        before = (_rows(segment, "parse_text"), _rows(segment, "parse_data"))
        assert len(before[1]) > 3 and len(list((segment / "parse_data").glob("part-*"))) > 1
        result = await run_crawler("parse", str(segment), *args, "-D", "parse.processes=2")
        assert result.code == 0, result.stderr
        assert (_rows(segment, "parse_text"), _rows(segment, "parse_data")) == before
        done = [e for e in result.events() if e["event"] == "parse.done"]
        assert done and done[0]["parsed"] == len(before[1])

    async def test_parses_a_segment_fetched_without_parsing(self, tmp_path, demo_site, crawl_args):
        """A segment fetched with fetcher.parse=false gets titles, text and outlinks from crawler parse."""
        segment = await _crawl_one_round(
            tmp_path, [demo_site.url("/")], [*crawl_args, "-D", "fetcher.parse=false"]
        )
        assert _rows(segment, "parse_data") == []
        result = await run_crawler("parse", str(segment), *crawl_args)
        assert result.code == 0, result.stderr
        [data] = _rows(segment, "parse_data")
        assert data["parse_status"] == "success" and data["title"] and len(data["outlinks"]) > 5
        assert _rows(segment, "parse_text")[0]["text"]
        for output in ("parse_text", "parse_data"):
            assert (segment / output / "_SUCCESS").exists()
        assert not [p for p in segment.iterdir() if p.name.startswith(".tmp-")]

    async def test_decodes_stored_bodies_and_dispatches_by_the_bytes(self, tmp_path, mixed_site, crawl_args):
        """Bodies are decoded per Content-Encoding; X-Robots-Tag, lying types and a gzip sitemap are handled."""
        paths = ["/gzip", "/x-robots", "/png", "/text", "/sitemap.xml.gz"]
        segment = await _crawl_one_round(
            tmp_path, [mixed_site + p for p in paths], [*crawl_args, "-D", "fetcher.parse=false"]
        )
        result = await run_crawler("parse", str(segment), *crawl_args)
        assert result.code == 0, result.stderr
        rows = {r["url"].removeprefix(mixed_site): r for r in _rows(segment, "parse_data")}
        assert set(rows) == set(paths)
        gz = rows["/gzip"]
        assert gz["title"] == "Café gzip" and [o["url"] for o in gz["outlinks"]] == [mixed_site + "/next"]
        hidden = rows["/x-robots"]
        assert hidden["outlinks"] == [] and hidden["metadata"]["robots_nofollow"] == "true"
        assert hidden["metadata"]["robots_noindex"] == "true"
        assert (
            rows["/png"]["parse_status"] == "unparsed"
            and rows["/png"]["metadata"]["content_type"] == "image/png"
        )
        assert (
            rows["/text"]["title"] == "Sniffed" and rows["/text"]["metadata"]["content_type"] == "text/html"
        )
        sitemap = rows["/sitemap.xml.gz"]
        assert [o["url"] for o in sitemap["outlinks"]] == [mixed_site + "/from-sitemap"]
        assert json.loads(sitemap["metadata"]["outlink_metadata"]) == {
            mixed_site + "/from-sitemap": {"lastmod": "2026-11-01", "priority": "0.9"}
        }


class TestReparseRefuses:
    async def test_unfetched_segment(self, tmp_path, demo_site, crawl_args):
        """A segment whose fetch has not completed is refused with a one-line reason."""
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(demo_site.url("/") + "\n")
        assert (await run_crawler("inject", str(seeds), *crawl_args)).code == 0
        generated = await run_crawler("generate", *crawl_args)
        segment = generated.stdout.strip()
        result = await run_crawler("parse", segment, *crawl_args)
        assert result.code == 1
        assert "fetch not complete" in result.stderr and segment in result.stderr

    async def test_corrupt_content_keeps_the_old_outputs(self, tmp_path, demo_site, crawl_args):
        """A corrupt WARC part fails the command naming the file, and the old parse outputs stay as they were."""
        segment = await _crawl_one_round(tmp_path, [demo_site.url("/")], crawl_args)
        before = _rows(segment, "parse_data")
        [warc] = (segment / "content").glob("*.warc.gz")
        warc.write_bytes(warc.read_bytes()[:200] + b"\x00garbage" * 50)
        result = await run_crawler("parse", str(segment), *crawl_args)
        assert result.code == 1 and str(warc) in result.stderr
        assert _rows(segment, "parse_data") == before
        assert (segment / "parse_data" / "_SUCCESS").exists()
        assert not [p for p in segment.iterdir() if p.name.startswith(".tmp-")]
