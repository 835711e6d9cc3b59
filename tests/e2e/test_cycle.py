"""The whole cycle against the demo site on loopback: inject, generate, fetch, updatedb, read back."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]


def _path(url: str) -> str:
    return urlsplit(url).path or "/"


async def _crawl(tmp_path: Path, site, crawl_args, rounds: int = 6, extra: tuple[str, ...] = ()):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"# demo seed\n{site.url('/')}\n")
    result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", str(rounds), *crawl_args, *extra)
    assert result.code == 0, result.stderr[-2000:]
    return result


async def _dump_db(crawl_args) -> list[dict]:
    dump = await run_crawler("readdb", "--dump", "--format", "jsonl", *crawl_args)
    assert dump.code == 0, dump.stderr
    return [json.loads(line) for line in dump.stdout.splitlines()]


class TestCrawlDemoSite:
    async def test_finds_exactly_the_reachable_pages(self, tmp_path, demo_site, crawl_args, expected_demo):
        """Every page reachable from the seed is fetched; redirects, 404s and robots-denied pages get their statuses."""
        await _crawl(tmp_path, demo_site, crawl_args)
        rows = await _dump_db(crawl_args)
        by_path = {_path(r["url"]): r for r in rows}
        fetched = sorted(p for p, r in by_path.items() if r["status"] == "fetched")
        assert fetched == expected_demo["reachable"]
        for source, (_target, code) in expected_demo["redirects"].items():
            assert by_path[source]["status"] == ("redirect_perm" if code in (301, 308) else "redirect_temp")
        for missing in expected_demo["missing"]:
            assert by_path[missing]["status"] == "gone"
        for denied in expected_demo["disallowed"]:
            assert by_path[denied]["status"] == "gone"
        assert all(r["digest"] for r in rows if r["status"] == "fetched")

    async def test_never_requests_disallowed_urls(self, tmp_path, demo_site, crawl_args, expected_demo):
        """The server's own log shows robots.txt was read and no /private/ URL was ever requested."""
        await _crawl(tmp_path, demo_site, crawl_args)
        paths = demo_site.paths()
        assert "/robots.txt" in paths
        assert not [p for p in paths if p.startswith("/private/")]
        assert all(r.user_agent.startswith("crawler/") for r in demo_site.requests)

    async def test_stops_early_when_nothing_is_due(self, tmp_path, demo_site, crawl_args):
        """A crawl with more rounds than the site needs stops with exit 0 once generate selects nothing."""
        result = await _crawl(tmp_path, demo_site, crawl_args, rounds=20)
        segments = result.stdout.split()
        assert 3 <= len(segments) < 20
        assert any(e["event"] == "generate.empty" for e in result.events())


class TestSegmentFiles:
    async def test_segments_read_back_with_duckdb_and_warcio(self, tmp_path, demo_site, crawl_args):
        """Every output of a segment is complete (_SUCCESS) and readable by DuckDB and warcio."""
        result = await _crawl(tmp_path, demo_site, crawl_args, rounds=1)
        segment = Path(result.stdout.split()[0])
        for output in ("fetchlist", "fetcher", "content", "parse_text", "parse_data"):
            assert (segment / output / "_SUCCESS").exists(), output
        con = duckdb.connect()
        fetched = con.execute(f"SELECT url, status, http_status FROM '{segment}/fetcher/*.parquet'").fetchall()
        assert [(s, h) for _, s, h in fetched] == [("success", 200)]
        title = con.execute(f"SELECT title, len(outlinks) FROM '{segment}/parse_data/*.parquet'").fetchone()
        assert title[0] == "Fernhill Instruments — Fernhill Instruments"
        assert title[1] > 5
        records = []
        for warc in sorted((segment / "content").glob("*.warc.gz")):
            with open(warc, "rb") as fh:
                for record in ArchiveIterator(fh):
                    records.append((record.rec_type, record.rec_headers.get_header("WARC-Target-URI")))
                    if record.rec_type == "response":
                        assert record.http_headers.get_statuscode() == "200"
                        assert b"<title>" in record.content_stream().read()
        assert sorted(t for t, _ in records) == ["request", "response", "warcinfo"]

    async def test_readseg_dump_has_the_contract_fields(self, tmp_path, demo_site, crawl_args):
        """readseg --dump prints one JSON object per URL with url, http_status, content_type, title, outlinks, text."""
        result = await _crawl(tmp_path, demo_site, crawl_args, rounds=2)
        segment = result.stdout.split()[1]
        dump = await run_crawler("readseg", "--dump", segment, *crawl_args)
        assert dump.code == 0, dump.stderr
        rows = [json.loads(line) for line in dump.stdout.splitlines()]
        assert len(rows) > 5
        for row in rows:
            assert {"url", "http_status", "content_type", "title", "outlinks", "text"} <= set(row)
        page = next(r for r in rows if r["http_status"] == 200 and r["title"])
        assert page["text"] and all({"url", "anchor"} <= set(o) for o in page["outlinks"])


class TestPoliteness:
    async def test_per_host_concurrency_is_respected(self, tmp_path, demo_site, crawl_args):
        """With per_host_concurrency 2 the server never sees more than 2 requests at once from the crawler."""
        demo_site.delay = 0.05
        await _crawl(tmp_path, demo_site, crawl_args, rounds=3,
                     extra=("-D", "fetcher.per_host_concurrency=2"))
        assert demo_site.max_in_flight == 2

    async def test_min_delay_spaces_request_starts(self, tmp_path, demo_site, crawl_args, expected_demo):
        """With min_delay 0.2s, no two requests to the host start closer than 0.2s (server timestamps)."""
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(demo_site.url(p) + "\n" for p in expected_demo["reachable"][:8]))
        result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "1", *crawl_args,
                                   "-D", "fetcher.min_delay=0.2")
        assert result.code == 0, result.stderr[-2000:]
        requests = sorted(demo_site.requests, key=lambda r: r.started)
        assert len(requests) > 5
        # robots.txt is fetched in the same turn as the host's first page, as Nutch does.
        gaps = [b.started - a.started for a, b in zip(requests, requests[1:], strict=False)
                if a.path_qs != "/robots.txt"]
        assert min(gaps) >= 0.2 - 0.01
