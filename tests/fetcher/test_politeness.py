"""Politeness seen from the servers' own request times: Crawl-delay, Retry-After, failing hosts, limits."""

from __future__ import annotations

import asyncio

from aiohttp import web

from crawler.fetcher.service import retry_after_seconds
from tests.fetcher.conftest import fetch, page, robots


def _gaps(server) -> list[float]:
    starts = sorted(h.started for h in server.hits if h.path != "/robots.txt")
    return [b - a for a, b in zip(starts, starts[1:], strict=False)]


class TestDelays:
    async def test_crawl_delay_is_honoured(self, tmp_path, servers):
        """robots.txt Crawl-delay for our agent spaces request starts, over a min_delay of 0."""
        site = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: crawler\nCrawl-delay: 0.4\n"),
                                           **{f"/p{i}": page() for i in range(4)}})
        _, rows, _ = await fetch(tmp_path, [site.url(f"/p{i}") for i in range(4)])
        assert all(r["status"] == "success" for r in rows.values())
        assert min(_gaps(site)) >= 0.4 - 0.01

    async def test_robots_request_counts_as_a_request_start(self, tmp_path, servers):
        """The robots.txt request is a start of the host's queue: the first page starts min_delay after it."""
        site = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nDisallow:\n"),
                                           **{f"/p{i}": page() for i in range(2)}})
        _, rows, _ = await fetch(tmp_path, [site.url(f"/p{i}") for i in range(2)], "fetcher.min_delay=0.3")
        assert all(r["status"] == "success" for r in rows.values())
        assert site.paths()[0] == "/robots.txt" and site.paths().count("/robots.txt") == 1
        starts = [h.started for h in site.hits]
        assert min(b - a for a, b in zip(starts, starts[1:], strict=False)) >= 0.3 - 0.01

    async def test_robots_wait_does_not_hold_other_hosts(self, tmp_path, servers):
        """With one worker, a host waiting out its delay after robots.txt lets another host's page go first."""
        a = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nCrawl-delay: 1\n"), "/p": page()})
        b = await servers("127.0.0.2", {"/robots.txt": robots("User-agent: *\nDisallow:\n"), "/p": page()})
        _, rows, _ = await fetch(tmp_path, [a.url("/p"), b.url("/p")], "fetcher.concurrency=1")
        assert all(r["status"] == "success" for r in rows.values())
        a_page = next(h for h in a.hits if h.path == "/p")
        b_page = next(h for h in b.hits if h.path == "/p")
        assert a_page.started - a.hits[0].started >= 1 - 0.01
        assert b_page.started < a_page.started

    async def test_crawl_delay_over_the_cap_skips_the_host(self, tmp_path, servers):
        """A Crawl-delay above fetcher.max_crawl_delay: every entry of the host is recorded as retry, none fetched."""
        site = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nCrawl-delay: 100\n"),
                                           **{f"/p{i}": page() for i in range(3)}})
        report, rows, _ = await fetch(tmp_path, [site.url(f"/p{i}") for i in range(3)], "fetcher.max_crawl_delay=5")
        assert {r["status"] for r in rows.values()} == {"retry"}
        assert {r["reason"] for r in rows.values()} == {"crawl_delay_over_cap"}
        assert report.dropped == {"crawl_delay_over_cap": 3}
        assert site.paths() == ["/robots.txt"]

    async def test_adaptive_delay_follows_response_time(self, tmp_path, servers):
        """With delay_factor 2 a host answering in 0.15 s gets at least 0.3 s between request starts."""
        async def slow(request):
            await asyncio.sleep(0.15)
            return web.Response(text="<html>slow</html>", content_type="text/html")

        site = await servers("127.0.0.1", {f"/p{i}": slow for i in range(4)})
        await fetch(tmp_path, [site.url(f"/p{i}") for i in range(4)], "fetcher.delay_factor=2",
                    "fetcher.max_delay=5")
        # Spacing counts from request starts (DESIGN 4): the delay, not response time plus the delay.
        assert min(_gaps(site)) >= 0.3 - 0.01


class TestBackoff:
    async def test_retry_after_holds_the_host_back(self, tmp_path, servers):
        """A 429 with Retry-After: 1 is recorded as retry and the host's next request starts a second later."""
        async def busy(request):
            return web.Response(status=429, headers={"Retry-After": "1"})

        site = await servers("127.0.0.1", {"/busy": busy, "/next": page()})
        _, rows, _ = await fetch(tmp_path, [site.url("/busy"), site.url("/next")])
        assert rows[site.url("/busy")]["status"] == "retry"
        assert rows[site.url("/next")]["status"] == "success"
        hits = {h.path: h for h in site.hits}
        assert hits["/next"].started - hits["/busy"].finished >= 1.0 - 0.01

    async def test_retry_after_over_the_cap_drops_the_host(self, tmp_path, servers):
        """A Retry-After longer than fetcher.max_crawl_delay drops the rest of the host's queue, recorded."""
        async def busy(request):
            return web.Response(status=503, headers={"Retry-After": "3600"})

        site = await servers("127.0.0.1", {f"/p{i}": busy for i in range(4)})
        report, rows, _ = await fetch(tmp_path, [site.url(f"/p{i}") for i in range(4)])
        assert len(rows) == 4
        assert report.dropped == {"retry_after_over_cap": 3}
        assert len(site.hits) == 2  # robots.txt and the one 503

    async def test_failing_host_queue_is_dropped_after_max_exceptions(self, tmp_path, servers):
        """After fetcher.max_exceptions_per_queue connection failures the rest of that host is recorded, not tried."""
        async def reset(request):
            request.transport.close()
            await asyncio.sleep(0)
            return web.Response()

        site = await servers("127.0.0.1", {f"/p{i}": reset for i in range(6)})
        report, rows, _ = await fetch(tmp_path, [site.url(f"/p{i}") for i in range(6)],
                                      "fetcher.max_exceptions_per_queue=2", "fetcher.max_delay=0.05")
        assert len(rows) == 6
        reasons = [r["reason"] for r in rows.values()]
        assert sum(r.startswith("connect") for r in reasons) == 2
        assert sum(r.startswith("max_exceptions_per_queue") for r in reasons) == 4
        assert {r["status"] for r in rows.values()} == {"retry"}
        # (aiohttp retries a GET once on a reused connection the server dropped, so count paths, not hits)
        assert len(set(site.paths()) - {"/robots.txt"}) == 2

    async def test_unreachable_robots_defers_the_whole_host(self, tmp_path, servers):
        """A 503 robots.txt disallows all for now: every entry is recorded retry and no page is requested."""
        async def down(request):
            return web.Response(status=503)

        site = await servers("127.0.0.1", {"/robots.txt": down, **{f"/p{i}": page() for i in range(3)}})
        report, rows, _ = await fetch(tmp_path, [site.url(f"/p{i}") for i in range(3)])
        assert {r["status"] for r in rows.values()} == {"retry"}
        assert site.paths() == ["/robots.txt"]

    def test_retry_after_accepts_seconds_and_dates(self):
        """Retry-After is read as delta-seconds or an HTTP date; garbage is ignored."""
        from datetime import UTC, datetime

        now = datetime(2026, 1, 1, tzinfo=UTC)
        assert retry_after_seconds("120", now) == 120
        assert retry_after_seconds("Thu, 01 Jan 2026 00:01:00 GMT", now) == 60
        assert retry_after_seconds("soon", now) is None
        assert retry_after_seconds(None, now) is None


class TestLimits:
    async def test_time_limit_records_what_was_not_fetched(self, tmp_path, servers):
        """fetcher.time_limit ends the fetch cleanly: every entry has a row, the unfetched ones say time_limit."""
        async def slow(request):
            await asyncio.sleep(0.2)
            return web.Response(text="<html>x</html>", content_type="text/html")

        site = await servers("127.0.0.1", {f"/p{i}": slow for i in range(30)})
        report, rows, _ = await fetch(tmp_path, [site.url(f"/p{i}") for i in range(30)], "fetcher.time_limit=0.5")
        assert len(rows) == 30
        assert 0 < report.dropped["time_limit"] < 30
        assert sum(r["status"] == "success" for r in rows.values()) == 30 - report.dropped["time_limit"]
        assert (tmp_path / "segments" / "20260101T000000000Z" / "fetcher" / "_SUCCESS").exists()


class TestQueueModes:
    async def test_domain_mode_shares_one_queue_across_subdomains(self, tmp_path, servers):
        """queue_mode domain: a.example.com and b.example.com never have requests in flight at the same time."""
        async def slow(request):
            await asyncio.sleep(0.05)
            return web.Response(text="<html>x</html>", content_type="text/html")

        a = await servers("127.0.0.2", {f"/p{i}": slow for i in range(4)})
        b = await servers("127.0.0.3", {f"/p{i}": slow for i in range(4)})
        urls = [f"http://a.example.com:{a.port}/p{i}" for i in range(4)]
        urls += [f"http://b.example.com:{b.port}/p{i}" for i in range(4)]
        await fetch(tmp_path, urls, "fetcher.queue_mode=domain",
                    "http.resolve={a.example.com: 127.0.0.2, b.example.com: 127.0.0.3}")
        spans = sorted((h.started, h.finished) for h in a.hits + b.hits if h.path != "/robots.txt")
        assert len(spans) == 8
        assert all(nxt[0] >= cur[1] - 0.005 for cur, nxt in zip(spans, spans[1:], strict=False))
