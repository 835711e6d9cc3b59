"""A truncated or garbled Parquet part or WARC file is reported by name; the rest of the segment stays readable."""

from __future__ import annotations

import asyncio
import json
import shutil
import zlib

import pyarrow.parquet as pq
import pytest

from crawler.devserver import SiteServer
from crawler.segments.check import damaged_parts, parquet_damage, warc_damage
from crawler.segments.layout import list_segments
from tests.conftest import DEMO_SITE, ROOT, run_crawler
from tests.damage import garble_a_page, xor


def _args(crawl_dir) -> list[str]:
    return ["-D", f"crawl_dir={crawl_dir}", "-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0",
            "-D", "fetcher.commit_records=3", "-D", "fetcher.follow_depth=0", "-D", "log.format=json"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """Two rounds of the demo site, committed in parts of three records (crawled once per module)."""
    crawl_dir = tmp_path_factory.mktemp("corruption") / "crawl"

    async def crawl():
        async with SiteServer(DEMO_SITE, "127.0.0.1", 0) as site:
            seeds = crawl_dir.parent / "seeds.txt"
            seeds.write_text(site.url("/") + "\n")
            return await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "2", *_args(crawl_dir), cwd=ROOT)

    result = asyncio.run(crawl())
    assert result.code == 0, result.stderr[-2000:]
    return crawl_dir


@pytest.fixture
def crawled(pristine, tmp_path):
    """A copy of the crawl for one test to damage, and the -D arguments that point at it."""
    crawl_dir = tmp_path / "crawl"
    shutil.copytree(pristine, crawl_dir)
    return crawl_dir, _args(crawl_dir)


def _truncate(path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _cut_inside_a_member(path, keep: float) -> None:
    """Cut a WARC file in the middle of the gzip member at ``keep`` of its length: a cut that lands
    between two members leaves a valid shorter file, which no check can tell from a whole one."""
    data = path.read_bytes()
    start, at = 0, int(len(data) * keep)
    while True:
        stream = zlib.decompressobj(31)
        stream.decompress(data[start:])
        end = len(data) - len(stream.unused_data)
        if end > at:
            break
        start = end
    path.write_bytes(data[: (start + end) // 2])


def _garble(path) -> None:
    xor(path, path.stat().st_size // 2, 64)


class TestDamageIsNamed:
    async def test_readseg_list_shows_each_damaged_file(self, crawled):
        """readseg --list names every truncated or garbled part, counts the readable rest, and lists the
        undamaged segments as before."""
        crawl_dir, args = crawled
        first, second = list_segments(crawl_dir / "segments")
        fetcher_parts = second.parts("fetcher")
        warcs = second.parts("content", "warc.gz")
        assert len(fetcher_parts) >= 2 and len(warcs) >= 2
        lost = pq.read_metadata(fetcher_parts[0]).num_rows
        before = await run_crawler("readseg", "--list", *args, cwd=ROOT)
        total = json.loads(before.stdout.splitlines()[1])["fetched"]
        _truncate(fetcher_parts[0])
        garble_a_page(second.parts("parse_data")[1])
        _cut_inside_a_member(warcs[0], 0.7)
        _garble(warcs[1])

        result = await run_crawler("readseg", "--list", *args, cwd=ROOT)
        assert result.code == 0, result.stderr
        listed = [json.loads(line) for line in result.stdout.splitlines()]
        assert listed[0]["name"] == first.name and listed[0]["damaged"] == []
        damaged = listed[1]["damaged"]
        for part in (fetcher_parts[0], second.parts("parse_data")[1], warcs[0], warcs[1]):
            assert any(d.startswith(f"{part.parent.name}/{part.name}: ") for d in damaged), (part, damaged)
        assert listed[1]["fetched"] == total - lost

    async def test_dump_writes_the_readable_records_then_fails_naming_the_part(self, crawled):
        """readseg --dump writes every record of the undamaged parts, then exits 1 naming the damaged part."""
        crawl_dir, args = crawled
        seg = list_segments(crawl_dir / "segments")[1]
        part = seg.parts("fetcher")[-1]
        lost = set(pq.read_table(part, columns=["url"]).column("url").to_pylist())
        every = set(pq.read_table(seg.dir("fetcher"), columns=["url"]).column("url").to_pylist())
        _truncate(part)
        result = await run_crawler("readseg", "--dump", str(seg.path), *args, cwd=ROOT)
        assert result.code == 1
        assert {json.loads(line)["url"] for line in result.stdout.splitlines()} == every - lost
        (message,) = [line for line in result.stderr.splitlines() if line.startswith("crawler:")]
        assert part.name in message and "damaged" in message


class TestDumpVerifiesPages:
    async def test_dump_leaves_out_a_garbled_page_of_text_and_names_its_part(self, crawled):
        """readseg --dump verifies the page CRCs: the text of a garbled parse_text part is left out (null),
        every other record is written as it was, and the command exits 1 naming the part."""
        crawl_dir, args = crawled
        seg = list_segments(crawl_dir / "segments")[1]
        part = seg.parts("parse_text")[0]
        lost = set(pq.read_table(part, columns=["url"]).column("url").to_pylist())
        before = await run_crawler("readseg", "--dump", str(seg.path), *args, cwd=ROOT)
        assert before.code == 0, before.stderr
        garble_a_page(part)
        result = await run_crawler("readseg", "--dump", str(seg.path), *args, cwd=ROOT)
        assert result.code == 1
        (message,) = [line for line in result.stderr.splitlines() if line.startswith("crawler:")]
        assert part.name in message and "CRC" in message
        was = {r["url"]: r for r in map(json.loads, before.stdout.splitlines())}
        now = {r["url"]: r for r in map(json.loads, result.stdout.splitlines())}
        assert now.keys() == was.keys() and lost <= now.keys()
        assert all(now[url]["text"] is None for url in lost)
        assert all(now[url] == was[url] for url in now.keys() - lost)


class TestParquetCheck:
    async def test_garbled_text_is_found_by_the_page_checksum(self, crawled):
        """Garbled page text decodes without error (zstd keeps no checksum here): the page CRC that
        the segment writer adds is what the deep check finds it by; the footer alone says nothing."""
        crawl_dir, _ = crawled
        seg = list_segments(crawl_dir / "segments")[1]
        part = seg.parts("parse_text")[0]
        garble_a_page(part)
        assert parquet_damage(part) is None
        assert "CRC" in (parquet_damage(part, deep=True) or "")
        assert list(damaged_parts(seg, deep=True)) == [part]


class TestWarcCheck:
    @pytest.mark.parametrize(("damage", "reason"), [
        (lambda p: _cut_inside_a_member(p, 0.6), "truncated"),
        (_garble, "corrupt gzip"),
        (lambda p: p.write_bytes(b"not a warc at all" * 50), "corrupt gzip"),
    ])
    async def test_damaged_warc_is_found(self, crawled, damage, reason):
        """A WARC file cut short, garbled, or replaced by junk is found (warcio alone stops silently)."""
        crawl_dir, _ = crawled
        seg = list_segments(crawl_dir / "segments")[1]
        warc = seg.parts("content", "warc.gz")[0]
        assert warc_damage(warc) is None
        damage(warc)
        assert reason in (warc_damage(warc) or "")
        assert list(damaged_parts(seg, deep=True)) == [warc]
