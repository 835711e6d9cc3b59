"""robots.txt per RFC 9309 through Protego, fetched once per origin and cached.

2xx: parse the first 500 KiB (the request reads no further). 4xx (except 429): allow all. 429, 5xx, or no
answer at all: disallow all for now, and the URLs are retried in a later round
(the RFC's "unreachable" rule; failing closed is the polite choice). Up to five
redirects are followed, across hosts too; each hop goes through the URL filters
(``urls.*``) like a page redirect, and a hop they reject counts as no robots.txt
(allow all), as a redirect to an invalid URL does. Rules are cached per origin for at
most ``robots.cache_ttl``, and each origin's outcome is logged once
(``robots.outcome``, with its reason). ``Sitemap:`` lines are kept so the
fetcher can hand them on as outlinks.

A fetch on its own has its own cache. The daemon gives all its concurrent
fetches one cache, so a host's robots.txt is requested once per TTL, not once
per segment; that cache fetches through the daemon's own protocols (a fetch
that ends closes its own), and forgets "unavailable" outcomes whenever a new
segment starts, as a fresh cache per segment did: such a host is asked again.
``crawl`` runs each round's fetch in an event loop of its own, so it carries the
settled answers from one round's cache into the next (``settled()``,
``remembered``): within ``robots.cache_ttl`` a host's robots.txt is requested
once per crawl, not once per round, and "unavailable" outcomes are asked again.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from protego import Protego

from crawler.config import CrawlerConfig
from crawler.errors import BlockedAddress, FetchError
from crawler.fetcher.outcome import retry_after_seconds
from crawler.protocols.base import Protocol
from crawler.urls.filters import UrlFilters
from crawler.urls.normalize import InvalidUrl, Normalizer, normalize

MAX_ROBOTS_BYTES = 500 * 1024
MAX_ROBOTS_REDIRECTS = 5


@dataclass(slots=True)
class RobotsRules:
    parser: Protego | None = None
    unavailable: bool = False  # 429/5xx/unreachable: deny all, retry later
    reason: str = ""
    sitemaps: list[str] = field(default_factory=list)  # not yet handed on as outlinks
    # time.monotonic() when the last robots.txt request started; None if none went out. The fetcher
    # counts it as a request start of the host's queue (DESIGN: never two starts closer than the delay).
    requested_at: float | None = None
    retry_after: float | None = None  # seconds a 429/503 on robots.txt asked the queue to wait
    error_kind: str | None = None  # the FetchError kind when robots.txt could not be fetched at all

    def allowed(self, url: str, agent: str) -> bool:
        if self.unavailable:
            return False
        if self.parser is None:
            return True
        return self.parser.can_fetch(url, agent)

    def crawl_delay(self, agent: str) -> float | None:
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(agent)
        return float(delay) if delay is not None else None


def parse_robots(body: bytes) -> RobotsRules:
    from crawler.fetcher.robotstxt import parse_robotstxt  # Protego with its RFC 9309 departures set right

    try:
        parser = parse_robotstxt(body[:MAX_ROBOTS_BYTES])
        return RobotsRules(parser=parser, reason="parsed", sitemaps=list(parser.sitemaps))
    except Exception as exc:  # noqa: BLE001 - a robots file we cannot read must not stop the host
        return RobotsRules(reason=f"unparsable robots.txt, allowing all ({exc.__class__.__name__})")


def origin_of(url: str) -> str:
    # Called for every URL: a plain absolute URL (what the fetcher has: normalized, ASCII, lower-case
    # scheme) is sliced, about a fifth of urlsplit's cost; anything unusual goes through urlsplit.
    sep = url.find("://")
    if sep > 0 and url.isascii() and url.isprintable() and url[:sep].isalpha() and url[:sep].islower():
        start = sep + 3
        end = len(url)
        for mark in "/?#":
            at = url.find(mark, start, end)
            if at != -1:
                end = at
        netloc = url[start:end]
        if " " not in netloc and "[" not in netloc and "]" not in netloc and url[-1] != " ":
            return url[:end]
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


# Answers carried from one cache to the next (``crawl``'s rounds): origin -> (expiry on the cache's clock, rules).
Remembered = dict[str, tuple[float, RobotsRules]]


class RobotsCache:
    """One in-flight fetch per origin; later callers await the same future until ``ttl`` runs out."""

    def __init__(self, protocol_for: Callable[[str], Protocol], log: Any, *, agent: str = "*",
                 ttl: float = 86400.0, max_entries: int = 50_000,
                 clock: Callable[[], float] = time.monotonic,
                 url_filter: Callable[[str], str | None] | None = None,
                 remembered: Remembered | None = None,
                 normalize: Callable[..., str] = normalize) -> None:
        self.protocol_for = protocol_for
        self.url_filter = url_filter  # None if a redirect target may be fetched, else the reason it may not
        self.normalize = normalize  # the crawl's normalizer (urls.*), for redirect targets
        self.agent = agent
        self.log = log
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        # A future while this cache's loop fetches; plain rules when remembered from an earlier cache.
        self._cache: OrderedDict[str, tuple[float, asyncio.Future[RobotsRules] | RobotsRules]] = OrderedDict(
            remembered or {})

    async def rules_for(self, url: str, origin: str | None = None) -> RobotsRules:
        """``url``'s origin's rules (``origin``: that origin, when the caller has it already)."""
        origin = origin or origin_of(url)
        cached = self._cache.get(origin)
        if cached is None or cached[0] <= self.clock():
            future = asyncio.ensure_future(self._fetch_logged(origin))
            self._cache[origin] = (self.clock() + self.ttl, future)
            self._cache.move_to_end(origin)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        else:
            held = cached[1]
            self._cache.move_to_end(origin)
            if isinstance(held, RobotsRules):
                return held
            future = held
            if future.done() and not future.cancelled() and future.exception() is None:
                return future.result()  # the usual case, a settled answer: no shield, no await
        try:
            return await asyncio.shield(future)
        except Exception:
            # A bug or a closed session, not an answer: the next caller asks again instead of failing for ttl.
            if self._cache.get(origin, (0.0, None))[1] is future:
                del self._cache[origin]
            raise

    def forget_unavailable(self) -> int:
        """Drop the settled "disallow all for now" outcomes (429, 5xx, unreachable); returns how many."""
        stale = [origin for origin, (_, held) in self._cache.items()
                 if (rules := _settled(held)) is not None and rules.unavailable]
        for origin in stale:
            del self._cache[origin]
        return len(stale)

    def settled(self) -> Remembered:
        """The answers a next cache may start from: settled, not expired, and not "unavailable" (asked
        again then, as a new segment of the daemon does)."""
        now = self.clock()
        return {origin: (expiry, rules) for origin, (expiry, held) in self._cache.items()
                if expiry > now and (rules := _settled(held)) is not None and not rules.unavailable}

    async def _fetch_logged(self, origin: str) -> RobotsRules:
        rules = await self._fetch(origin)
        rules.sitemaps = self._normalized(rules.sitemaps, origin)
        delay = rules.crawl_delay(self.agent) if rules.parser is not None else None
        self.log.info("robots.outcome", origin=origin, reason=rules.reason,
                      outcome="disallow_all" if rules.unavailable else "rules" if rules.parser else "allow_all",
                      crawl_delay=delay, sitemaps=len(rules.sitemaps), retry_after=rules.retry_after)
        return rules

    def _normalized(self, urls: list[str], origin: str) -> list[str]:
        """``Sitemap:`` URLs as the crawl spells URLs (urls.*), once each; an invalid one is left out."""
        out: dict[str, None] = {}
        for url in urls:
            try:
                out[self.normalize(url, base=origin + "/robots.txt")] = None
            except InvalidUrl:
                continue
        return list(out)

    async def _fetch(self, origin: str) -> RobotsRules:
        starts: list[float] = []
        rules = await self._follow(origin, starts)
        if starts:
            rules.requested_at = starts[-1]
        return rules

    async def _follow(self, origin: str, starts: list[float]) -> RobotsRules:
        """Fetch ``origin``'s robots.txt through its redirects; ``starts`` gets, for each request, when its answer came in."""
        target = origin + "/robots.txt"
        for _ in range(MAX_ROBOTS_REDIRECTS + 1):
            try:
                protocol = self.protocol_for(target)
                # Counted as a start of the queue from when its answer (or failure) is in, not from when it
                # was sent: it is most often a host's first request, on a new connection the server reads a
                # little after the crawler writes, so counted from the send the next page (on the kept-alive
                # connection, read at once) could reach the server a millisecond or two inside the delay.
                try:
                    response = await protocol.fetch(target, limit=MAX_ROBOTS_BYTES)
                finally:
                    starts.append(time.monotonic())
            except BlockedAddress as exc:
                # Not "unreachable": the URLs themselves are refused the same way, and fail for good.
                return RobotsRules(reason=f"robots.txt not fetched: {exc}")
            except FetchError as exc:
                return RobotsRules(unavailable=True, reason=f"robots.txt unreachable: {exc.summary}",
                                   error_kind=exc.kind)
            status = response.status
            if 200 <= status < 300:
                return parse_robots(response.body)
            if status in (301, 302, 303, 307, 308):
                location = response.header("Location")
                try:
                    target = self.normalize(location or "", base=target)
                except InvalidUrl:
                    return RobotsRules(reason=f"robots.txt redirect to an invalid URL ({status}), allowing all")
                rejected = self.url_filter(target) if self.url_filter is not None else None
                if rejected:
                    return RobotsRules(reason=f"robots.txt redirect target filtered ({rejected}), allowing all")
                continue
            if status == 429 or status >= 500:
                return RobotsRules(unavailable=True, reason=f"robots.txt answered {status}",
                                   retry_after=retry_after_seconds(response.header("Retry-After")))
            return RobotsRules(reason=f"robots.txt answered {status}, allowing all")
        return RobotsRules(reason="robots.txt redirects too often, allowing all")


def robots_cache(cfg: CrawlerConfig, protocol_for: Callable[[str], Protocol], log: Any, *,
                 filters: UrlFilters | None = None, normalize: Callable[..., str] | None = None,
                 remembered: Remembered | None = None) -> RobotsCache:
    """The crawl's robots.txt cache: ``http.agent_name``, ``robots.cache_ttl``, and redirect hops through the
    crawl's URL filters and normalizer (``urls.*``; ``filters`` and ``normalize`` when the caller has them).

    robots.txt may redirect across hosts (RFC 9309), so db.ignore_external_links does not apply to it:
    ``check()`` without a source applies none.
    """
    if filters is None:
        filters = UrlFilters(cfg.urls, ignore_external=cfg.db.ignore_external_links)
    return RobotsCache(protocol_for, log, agent=cfg.http.agent_name, ttl=cfg.robots.cache_ttl,
                       url_filter=filters.check, remembered=remembered,
                       normalize=normalize if normalize is not None else Normalizer.from_config(cfg).normalize)


def _settled(held: asyncio.Future[RobotsRules] | RobotsRules) -> RobotsRules | None:
    if isinstance(held, RobotsRules):
        return held
    return held.result() if held.done() and not held.cancelled() and held.exception() is None else None
