"""Redirects followed by the fetcher itself (DESIGN 4), one hop at a time.

A 3xx with a Location becomes the source row (status redirect_perm/temp, the
target in ``redirect_url``) and, when the hop is allowed, a new entry for the
target. That entry goes through the target host's queue like any other, so it
is robots-checked, polite, and its address checked on connection. Its row
records ``redirect_source`` (the fetchlist URL the chain started from) and
``redirect_hop`` (1, 2, ...), so the whole chain can be read back from the
fetcher output. A hop is not followed, and the reason is added to the source
row, when the target is invalid, filtered out, already in this chain (a loop),
already fetched in this segment, fetched in an earlier round and not due yet
(``known.py``: the webdb's pages of this fetch's hosts), or past ``http.max_redirects``;
updatedb still learns the target and it is crawled in a later round. A
fetchlist entry that a hop already fetched is not fetched again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from crawler.config import CrawlerConfig
from crawler.fetcher.known import KnownFetched
from crawler.urls.normalize import host_of, normalize

try:  # URL filters land with the URL work; until then every normalized target passes.
    from crawler.urls.filters import UrlFilters
except ImportError:  # pragma: no cover - only before crawler/urls/filters.py exists
    UrlFilters = None  # type: ignore[assignment,misc]

_REMEMBERED = 200_000  # URLs taken per fetch, so a thousand pages redirecting to /login fetch it once


class RedirectPolicy:
    def __init__(self, cfg: CrawlerConfig) -> None:
        self.max_redirects = cfg.http.max_redirects
        urls_cfg = getattr(cfg, "urls", None)
        self.filters = (UrlFilters(urls_cfg, ignore_external=cfg.db.ignore_external_links)
                        if UrlFilters is not None and urls_cfg is not None else None)
        # URL -> taken as a redirect hop? (bounded: past it, a rare URL may be fetched twice; updatedb keeps the latest)
        self._taken: OrderedDict[str, bool] = OrderedDict()
        self.known = KnownFetched()  # the fetcher loads the webdb's not-due URLs at start

    def _remember(self, url: str, as_hop: bool) -> None:
        self._taken[url] = as_hop
        while len(self._taken) > _REMEMBERED:
            self._taken.popitem(last=False)

    def take(self, entry: dict[str, Any]) -> bool:
        """False when a fetchlist entry was already fetched as another URL's redirect hop in this run."""
        if entry.get("redirect_hop"):
            return True
        if self._taken.get(entry["url"]):
            return False
        self._remember(entry["url"], False)
        return True

    def target(self, location: str | None, base: str) -> str:
        """The normalized absolute target; raises crawler.urls.normalize.InvalidUrl."""
        return normalize(location or "", base=base)

    def hop(self, entry: dict[str, Any], target: str) -> tuple[dict[str, Any] | None, str]:
        """The entry for fetching ``target`` next, or None and the reason it is not followed."""
        hop = (entry.get("redirect_hop") or 0) + 1
        chain = entry.get("redirect_chain") or (entry["url"],)
        if target in chain:
            return None, "redirect loop"
        if hop > self.max_redirects:
            return None, f"more than http.max_redirects ({self.max_redirects}) hops"
        if self.filters is not None:
            rejected = self.filters.check(target, entry["url"])
            if rejected:
                return None, f"redirect target filtered: {rejected}"
        if target in self._taken:
            return None, "redirect target already fetched in this segment"
        if target in self.known:
            return None, "redirect target fetched in an earlier round and not due"
        self._remember(target, True)
        return {
            **entry,
            "url": target,
            "host": host_of(target),
            "modified_time": None,
            "etag": None,
            "redirect_source": entry.get("redirect_source") or entry["url"],
            "redirect_hop": hop,
            "redirect_chain": (*chain, target),
        }, ""
