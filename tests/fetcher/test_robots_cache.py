"""robots.txt in the fetcher: one fetch and one log line per host, the TTL, Sitemap lines as outlinks."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from aiohttp import web

from crawler.config import load_config
from crawler.fetcher.robots import RobotsCache
from crawler.protocols.http import HttpProtocol
from crawler.segments.layout import Segment
from tests.fetcher.conftest import fetch, page, read_rows, redirect, robots


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TestRobotsCache:
    async def test_outcome_logged_once_per_host_with_its_reason(self, tmp_path, servers):
        """Two hosts, many URLs each: robots.txt is requested once per host and robots.outcome logged once each."""
        a = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nDisallow: /no\n"),
                                        **{f"/p{i}": page() for i in range(5)}})
        b = await servers("127.0.0.2", {f"/p{i}": page() for i in range(5)})
        _, _, logs = await fetch(tmp_path, [s.url(f"/p{i}") for s in (a, b) for i in range(5)])
        outcomes = {e["origin"]: e for e in logs if e["event"] == "robots.outcome"}
        assert len([e for e in logs if e["event"] == "robots.outcome"]) == 2
        assert outcomes[a.url("")]["reason"] == "parsed"
        assert "404" in outcomes[b.url("")]["reason"] and outcomes[b.url("")]["outcome"] == "allow_all"
        assert a.paths().count("/robots.txt") == 1 and b.paths().count("/robots.txt") == 1

    async def test_rules_are_refetched_after_the_ttl(self, servers):
        """Within robots.cache_ttl the cached rules answer; after it, robots.txt is fetched again."""
        site = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nDisallow:\n")})
        protocol = HttpProtocol(load_config(None, ["http.allow_private_networks=true"]))
        clock = Clock()
        cache = RobotsCache(lambda _url: protocol, structlog.get_logger(), ttl=60, clock=clock)
        try:
            for _ in range(3):
                await cache.rules_for(site.url("/x"))
            clock.now = 61
            await cache.rules_for(site.url("/y"))
        finally:
            await protocol.aclose()
        assert site.paths() == ["/robots.txt", "/robots.txt"]

    async def test_forget_unavailable_asks_again_only_hosts_that_could_not_answer(self, servers):
        """After forget_unavailable a host whose robots.txt answered 503 is asked again; one that answered is not."""
        async def unavailable(request):
            return web.Response(status=503)

        down = await servers("127.0.0.1", {"/robots.txt": unavailable})
        up = await servers("127.0.0.2", {"/robots.txt": robots("User-agent: *\nDisallow:\n")})
        protocol = HttpProtocol(load_config(None, ["http.allow_private_networks=true"]))
        cache = RobotsCache(lambda _url: protocol, structlog.get_logger(), ttl=3600)
        try:
            assert (await cache.rules_for(down.url("/x"))).unavailable
            assert not (await cache.rules_for(up.url("/x"))).unavailable
            assert cache.forget_unavailable() == 1
            await cache.rules_for(down.url("/y"))
            await cache.rules_for(up.url("/y"))
        finally:
            await protocol.aclose()
        assert down.paths() == ["/robots.txt", "/robots.txt"] and up.paths() == ["/robots.txt"]

    async def test_a_closed_session_is_not_cached_as_the_hosts_answer(self, servers):
        """A robots.txt fetch that raises (its protocol closed) is not cached: the next caller fetches it again."""
        site = await servers("127.0.0.1", {"/robots.txt": robots("User-agent: *\nDisallow: /no\n")})
        cfg = load_config(None, ["http.allow_private_networks=true"])
        closed, working = HttpProtocol(cfg), HttpProtocol(cfg)
        await closed.aclose()
        protocols = [closed, working]
        cache = RobotsCache(lambda _url: protocols[0], structlog.get_logger(), ttl=3600)
        try:
            with pytest.raises(Exception):  # noqa: B017, PT011 - whatever the closed session raises
                await cache.rules_for(site.url("/x"))
            protocols.pop(0)
            assert not (await cache.rules_for(site.url("/no"))).allowed(site.url("/no"), "*")
        finally:
            await working.aclose()
        assert site.paths() == ["/robots.txt"]

    async def test_settled_answers_carry_into_a_new_cache_but_unavailable_ones_do_not(self, servers):
        """A cache started from settled() answers a host that answered without a request; a 503 host is asked again."""
        async def unavailable(request):
            return web.Response(status=503)

        down = await servers("127.0.0.1", {"/robots.txt": unavailable})
        up = await servers("127.0.0.2", {"/robots.txt": robots("User-agent: *\nDisallow: /no\n")})
        protocol = HttpProtocol(load_config(None, ["http.allow_private_networks=true"]))
        clock = Clock()
        first = RobotsCache(lambda _url: protocol, structlog.get_logger(), ttl=60, clock=clock)
        try:
            await first.rules_for(down.url("/x"))
            await first.rules_for(up.url("/x"))
            carried = first.settled()
            assert list(carried) == [up.url("")]
            second = RobotsCache(lambda _url: protocol, structlog.get_logger(), ttl=60, clock=clock,
                                 remembered=carried)
            assert not (await second.rules_for(up.url("/no"))).allowed(up.url("/no"), "*")
            assert (await second.rules_for(down.url("/y"))).unavailable
            clock.now = 61  # the carried answer keeps its own expiry
            assert second.settled() == {}
            await second.rules_for(up.url("/z"))
        finally:
            await protocol.aclose()
        assert down.paths() == ["/robots.txt", "/robots.txt"] and up.paths() == ["/robots.txt", "/robots.txt"]


class TestRobotsSize:
    async def test_only_the_first_500_kib_are_read(self, tmp_path, servers):
        """A robots.txt that sends its rules and 600 KiB of filler, then stalls, still answers with its rules:
        the fetcher stops reading at 500 KiB instead of waiting for (or downloading) the rest."""
        release = asyncio.Event()

        async def huge(request):
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            await resp.write(b"User-agent: *\nDisallow: /no\n" + b"# filler\n" * (600 * 1024 // 9))
            await release.wait()  # the rest of the body does not come while the crawler waits
            return resp

        site = await servers("127.0.0.1", {"/robots.txt": huge, "/yes": page(), "/no": page()})
        _, rows, logs = await fetch(tmp_path, [site.url("/yes"), site.url("/no")],
                                    "http.timeout.read=30s", "http.timeout.total=60s")
        release.set()
        assert rows[site.url("/yes")]["status"] == "success"
        assert rows[site.url("/no")]["status"] == "robots_denied"
        (outcome,) = [e for e in logs if e["event"] == "robots.outcome"]
        assert outcome["reason"] == "parsed"


class TestRobotsRedirects:
    async def test_redirect_to_a_filtered_url_means_no_robots_txt(self, tmp_path, servers):
        """A robots.txt hop that urls.filters rejects is not requested: allow all, as for an invalid target."""
        site = await servers("127.0.0.1", {})
        site.routes.update({"/robots.txt": redirect(site.url("/blocked/robots.txt")),
                            "/blocked/robots.txt": robots("User-agent: *\nDisallow: /\n"), "/p": page()})
        _, rows, logs = await fetch(tmp_path, [site.url("/p")], "urls.filters=['-/blocked/', '+.']")
        assert rows[site.url("/p")]["status"] == "success"
        assert "/blocked/robots.txt" not in site.paths()
        (outcome,) = [e for e in logs if e["event"] == "robots.outcome"]
        assert outcome["outcome"] == "allow_all"
        assert "robots.txt redirect target filtered" in outcome["reason"]
        assert "urls.filters rule 1" in outcome["reason"]

    async def test_redirect_to_an_allowed_url_is_followed(self, tmp_path, servers):
        """A hop the filters keep is followed and its rules apply."""
        site = await servers("127.0.0.1", {})
        site.routes.update({"/robots.txt": redirect(site.url("/real/robots.txt")),
                            "/real/robots.txt": robots("User-agent: *\nDisallow: /p\n"), "/p": page()})
        _, rows, _ = await fetch(tmp_path, [site.url("/p")], "urls.filters=['-/blocked/', '+.']")
        assert rows[site.url("/p")]["status"] == "robots_denied"


class TestSitemaps:
    async def test_sitemap_lines_become_outlinks_of_the_first_parsed_page(self, tmp_path, servers):
        """robots.txt Sitemap: URLs appear once, anchor 'sitemap', in the outlinks of one parsed page of the host."""
        site = await servers("127.0.0.1", {})
        site.routes.update({"/robots.txt": robots(f"User-agent: *\nDisallow:\nSitemap: {site.url('/sitemap.xml')}\n"),
                            **{f"/p{i}": page() for i in range(3)}})
        await fetch(tmp_path, [site.url(f"/p{i}") for i in range(3)])
        seg = Segment(next((tmp_path / "segments").iterdir()))
        outlinks = [o for row in read_rows(seg, "parse_data") for o in row["outlinks"]]
        assert outlinks == [{"url": site.url("/sitemap.xml"), "anchor": "sitemap"}]
        # Marked for updatedb, which never cuts them: a page's own link may be anchored "sitemap" too.
        marks = [dict(row["metadata"]).get("robots_sitemaps") for row in read_rows(seg, "parse_data")]
        assert sorted(marks, key=str) == ["1", None, None]

    async def test_sitemap_lines_are_normalized_like_every_url(self, tmp_path, servers):
        """Sitemap: URLs reach the outlinks as the normalizer spells them (case, //, tracking parameters), once."""
        site = await servers("127.0.0.1", {})
        spelled = [f"HTTP://{site.host}:{site.port}//maps//sitemap.xml?utm_source=robots",
                   site.url("/maps/sitemap.xml"), "http://[bad"]
        site.routes.update({"/robots.txt": robots("User-agent: *\n" + "".join(f"Sitemap: {u}\n" for u in spelled)),
                            "/p": page()})
        await fetch(tmp_path, [site.url("/p")])
        seg = Segment(next((tmp_path / "segments").iterdir()))
        outlinks = [o["url"] for row in read_rows(seg, "parse_data") for o in row["outlinks"]]
        assert outlinks == [site.url("/maps/sitemap.xml")]
