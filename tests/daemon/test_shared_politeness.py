"""Two fetches in one process sharing a SharedPoliteness: the server sees one crawler's limits, not two."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from crawler.devserver import SiteServer
from crawler.fetcher.politeness import RequestSlots, SharedPoliteness
from crawler.fetcher.service import Fetcher
from crawler.segments.layout import Segment
from tests.daemon.conftest import write_site
from tests.fetcher.conftest import make_cfg, make_segment, rows_by_url


def segment_named(tmp_path: Path, name: str, urls: list[str]) -> Segment:
    """make_segment's fetchlist, under its own segment name (two segments side by side)."""
    built = make_segment(tmp_path / name, urls)
    target = tmp_path / "segments" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    built.path.rename(target)
    return Segment(target)


async def fetch_both(cfg, segments: list[Segment]) -> None:
    shared = SharedPoliteness(cfg.fetcher)
    log = structlog.get_logger()
    await asyncio.gather(*(Fetcher(cfg, seg, log, politeness=shared).run() for seg in segments))


class TestSharedPoliteness:
    async def test_crawl_delay_spaces_starts_across_two_fetches(self, tmp_path):
        """A host in two concurrently fetched segments gets every request start (robots.txt too) a Crawl-delay apart."""
        root = write_site(tmp_path / "site", 6)
        (root / "robots.txt").write_text("User-agent: *\nCrawl-delay: 0.3\n")
        async with SiteServer(root, "127.0.0.1") as site:
            cfg = make_cfg(tmp_path / "crawl")
            first = segment_named(tmp_path, "20260101T000000000Z", [site.url(f"/p{i}.html") for i in range(3)])
            second = segment_named(tmp_path, "20260101T000001000Z", [site.url(f"/p{i}.html") for i in range(3, 6)])
            await fetch_both(cfg, [first, second])
        assert {r["status"] for seg in (first, second) for r in rows_by_url(seg).values()} == {"success"}
        starts = sorted(r.started for r in site.requests)
        assert len([r for r in site.requests if r.path_qs != "/robots.txt"]) == 6
        assert min(b - a for a, b in zip(starts, starts[1:], strict=False)) >= 0.3 - 0.01
        assert site.max_in_flight == 1

    async def test_total_concurrency_is_the_process_cap(self, tmp_path):
        """Two fetches of fetcher.concurrency=3 each never have more than 3 requests in flight together."""
        root = write_site(tmp_path / "site", 16)
        async with SiteServer(root, "127.0.0.1", delay=0.1) as site:
            cfg = make_cfg(tmp_path / "crawl", "fetcher.concurrency=3", "fetcher.per_host_concurrency=8")
            urls = [site.url(f"/p{i}.html") for i in range(16)]
            first = segment_named(tmp_path, "20260101T000000000Z", urls[:8])
            second = segment_named(tmp_path, "20260101T000001000Z", urls[8:])
            await fetch_both(cfg, [first, second])
        assert len(rows_by_url(first)) == len(rows_by_url(second)) == 8
        assert site.max_in_flight <= 3
        assert len([r for r in site.requests if r.path_qs != "/robots.txt"]) == 16


class TestRequestSlots:
    async def test_a_lower_limit_holds_new_acquirers_until_enough_are_released(self):
        """set_limit below the slots in use lets nobody in until the holders drop under the new limit."""
        slots = RequestSlots(2)
        await slots.acquire()
        await slots.acquire()
        slots.set_limit(1)
        waiter = asyncio.ensure_future(slots.acquire())
        slots.release()
        await asyncio.sleep(0)
        assert not waiter.done()
        slots.release()
        await waiter
        assert slots.used == 1
