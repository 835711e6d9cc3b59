"""In-round following: a page's same-origin outlinks that the webdb does not know, fetched by the same fetch.

Without it a site costs one round per level of its link tree, and every round
pays generate, updatedb and invertlinks: on Boost's documentation, whose pages
are chained by ``rel=next``, 33 rounds of ~0.2 s for a 4 s fetch. Nutch's
fetcher can follow outlinks too (``fetcher.follow.outlinks.depth``); here it
is on by default (``fetcher.follow_depth``), bounded by
``fetcher.follow_max_per_host``.

An outlink is followed only when nothing else would fetch it sooner or has
fetched it: its origin (scheme, host, port) is the page's, whose host the
fetchlist lists (so the fetch loaded the webdb's URLs of that host, and the
host's partition is this fetch's); the webdb does not know it (any status:
an unfetched URL there is due in some fetchlist); this fetch has not taken
it (fetchlist entry, redirect hop or followed) and, in the daemon, no other
running segment holds it; the URL filters pass it (``urls.*`` and the
schemes, as updatedb applies them); it lies under no suspected spider trap
of the webdb. Its entry then goes through its host's queue like any other:
robots.txt, politeness and the address check apply, and its row is a row of
this segment, so updatedb records the page as fetched and its outlinks as
usual.

A page that repeats one fetched on its host earlier in this fetch has no
outlink followed: the same content digest, or the same same-origin links
written relative to its folder. A spider trap serves one page (or one
template) at every path, each linking ``next/``, ``a/``, ``b/`` deeper, so
its second page repeats the first in both ways, whatever text it shows; two
real pages of one folder with the same links have nothing new to follow from
the second, and a mirrored tree's pages are left to the next round. updatedb's
finer rules (crawler/jobs/traps.py) then decide what of a trap the webdb
keeps. Nothing is lost by any of these checks: a link not followed is still
the page's outlink, and updatedb queues it for the next round. A link with a
query is never followed in the round: calendars, facets and ``?page=N`` walk
without end, one distinct page at a time, and are left to the rounds, where
``generate.max_per_host`` and the novelty budget bound them. A path that
grows without end (``/d1/d2/d3/``...) stops at ``urls.max_path_depth``, as
it would over the rounds: the same requests, sooner.
``fetch.done``'s ``follow_skipped`` counts the links left for a budget
(``max_per_host``, ``max_per_fetch``, ``queue_full``: ``fetcher.follow_max_queued``
followed entries already wait in the host queues) and the pages whose links were
left: as repeats (``repeated_page``), or ``follow_depth`` hops from their entry
(``max_depth``).
"""

from __future__ import annotations

from typing import Any

from crawler.config import CrawlerConfig
from crawler.fetcher.known import KnownFetched
from crawler.fetcher.outlinks import origin_prefix
from crawler.fetcher.progress import Counters
from crawler.fetcher.redirects import RecentKeys, RedirectPolicy
from crawler.statuses import DbStatus

_CONSIDERED = 100_000  # link hashes already looked at in this fetch (~7 MB); a forgotten one is looked at again
_SEEN = 100_000  # (host, digest) and (host, link shape) pairs of this fetch's pages (~7 MB)
# URLs one fetch follows in all: each is kept (its hash, ~70 bytes) so that none is followed twice, even
# past what the bounded sets of the fetch's taken URLs remember.
_MAX_FOLLOWED = 200_000


class Follower:
    """What one fetch follows; ``every`` (the webdb's URLs of the fetchlist's hosts) is set at its start."""

    def __init__(self, cfg: CrawlerConfig, redirects: RedirectPolicy, counters: Counters) -> None:
        self.depth = cfg.fetcher.follow_depth
        per_host = cfg.fetcher.follow_max_per_host
        if cfg.generate.max_per_host:
            per_host = min(per_host, cfg.generate.max_per_host)
        self.per_host = per_host
        self.max_outlinks = cfg.db.max_outlinks
        self.on = cfg.fetcher.parse and self.depth > 0 and per_host > 0
        self.redirects = redirects
        self.every: KnownFetched | None = None  # None: following is off for this fetch
        self.traps: dict[str, list[str]] = {}
        self.counters = counters  # its ``followed`` and ``follow_skipped`` (reason -> links left for a budget)
        self._per_host: dict[str, int] = {}
        self._considered = RecentKeys(_CONSIDERED)
        self._followed: set[int] = set()
        self._seen = RecentKeys(_SEEN)  # hashes of the contents and link shapes of this fetch's pages

    def wants_links(self, entry: dict[str, Any]) -> bool:
        """Whether the page of ``entry`` may have its outlinks followed (so its parse hands them back)."""
        if self.every is None:
            return False
        if (entry.get("follow_depth") or 0) >= self.depth:
            self._skip("max_depth")  # a page whose links wait for the next round: a cut, so it is counted
            return False
        source = entry.get("redirect_source")
        # A hop to another host reached a host whose webdb URLs this fetch did not load.
        return source is None or origin_prefix(source) == origin_prefix(entry["url"])

    def follow(self, entry: dict[str, Any], digest: str | None, links: list[str],
               room: int) -> list[dict[str, Any]]:
        """The entries to queue for ``links`` (same-origin outlinks of ``entry``'s page, parsed with digest
        ``digest``); ``room`` is how many more entries the host queues take now."""
        host, url = entry["host"], entry["url"]
        every, redirects, considered = self.every, self.redirects, self._considered
        if every is None or self._repeats(host, url, digest, links):
            return []
        traps = self.traps.get(host)
        depth = (entry.get("follow_depth") or 0) + 1
        count = self._per_host.get(host, 0)
        entries: list[dict[str, Any]] = []
        for link in links:
            key = hash(link)
            if key in considered:
                continue
            considered.put(key, True)
            if "?" in link:
                continue  # a query walk (calendars, facets, ?page=N) is left to the rounds and their caps
            if link in every or redirects.filters is not None and redirects.filters.check(link, url):
                continue
            if traps is not None and any(link.startswith(prefix) for prefix in traps):
                continue
            if count >= self.per_host:
                self._skip("max_per_host")
                continue
            if key in self._followed:
                continue
            if len(self._followed) >= _MAX_FOLLOWED:
                self._skip("max_per_fetch")
                continue
            if len(entries) >= room:
                self._skip("queue_full")
                continue
            if not redirects.claim(link):
                continue  # taken in this fetch already, or held by another of the daemon's segments
            self._followed.add(key)
            count += 1
            self.counters.followed += 1
            entries.append({"url": link, "host": host, "partition": entry["partition"], "score": None,
                            "db_status": str(DbStatus.UNFETCHED), "retries": 0, "fetch_time": None,
                            "modified_time": None, "etag": None, "follow_depth": depth})
        self._per_host[host] = count
        return entries

    def _repeats(self, host: str, url: str, digest: str | None, links: list[str]) -> bool:
        """Whether the page repeats one of its host's pages fetched earlier in this fetch: the same content,
        or the same links written relative to its folder (a trap's page one folder down links ``next/``,
        ``a/`` and ``b/`` again, whatever its text; two pages of one folder with the same links have
        nothing new to follow from the second). Either is remembered for the pages after it."""
        folder = url[:url.rfind("/") + 1]
        start = len(folder)
        shape = hash((host, frozenset(link[start:] if link.startswith(folder) else link for link in links)))
        seen = self._seen
        if shape in seen or digest is not None and hash((host, digest)) in seen:
            self._skip("repeated_page")
            return True
        seen.put(shape, True)
        if digest is not None:
            seen.put(hash((host, digest)), True)
        return False

    def _skip(self, reason: str) -> None:
        skipped = self.counters.follow_skipped
        skipped[reason] = skipped.get(reason, 0) + 1
