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

The daemon fetches several segments at once, and gives them one ``HeldUrls``:
a hop is not followed to a URL another running segment lists or took as a hop,
and a fetchlist entry another segment already took as a hop is not fetched
again (logged, no row: the row is in that segment, and a retry row here would
overwrite its result when merged later). The daemon also leaves the held hop
targets out of the segments it generates meanwhile, so such an entry is rare.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from crawler.config import CrawlerConfig
from crawler.fetcher.compactkeys import CompactKeys
from crawler.fetcher.known import KnownFetched, url_hash
from crawler.urls.normalize import Normalizer, host_of

try:  # URL filters land with the URL work; until then every normalized target passes.
    from crawler.urls.filters import UrlFilters
except ImportError:  # pragma: no cover - only before crawler/urls/filters.py exists
    UrlFilters = None  # type: ignore[assignment,misc]

_REMEMBERED = 200_000  # URLs taken per fetch, so a thousand pages redirecting to /login fetch it once
_HELD_HOPS = 200_000  # hop targets held for the whole process (about 20 MB); past it the oldest may be fetched twice


def listed_hashes(urls: Iterable[str]) -> KnownFetched:
    """A segment's fetchlist URLs as sorted 64-bit hashes: 8 bytes a URL, however long the URLs."""
    return KnownFetched(array("Q", sorted(url_hash(u) for u in urls)))


class HeldUrls:
    """What the running fetches of one process hold, until the daemon releases their segment: fetchlists, hops."""

    def __init__(self, max_hops: int = _HELD_HOPS) -> None:
        self.max_hops = max_hops
        self._listed: dict[str, KnownFetched] = {}
        self._hops: OrderedDict[str, str] = OrderedDict()  # URL -> the segment that took it as a hop

    def list_segment(self, segment: str, listed: KnownFetched) -> None:
        self._listed[segment] = listed

    def take_hop(self, url: str, segment: str) -> None:
        self._hops[url] = segment
        self._hops.move_to_end(url)
        while len(self._hops) > self.max_hops:
            self._hops.popitem(last=False)

    def hop_holder(self, url: str, segment: str) -> str | None:
        """Another segment that took ``url`` as a redirect hop."""
        holder = self._hops.get(url)
        return holder if holder is not None and holder != segment else None

    def holder(self, url: str, segment: str) -> str | None:
        """Another segment that took ``url`` as a hop or lists it in its fetchlist."""
        holder = self.hop_holder(url, segment)
        if holder is not None:
            return holder
        return next((name for name, listed in self._listed.items() if name != segment and url in listed), None)

    def hop_targets(self) -> list[str]:
        return list(self._hops)

    def forget(self, segment: str) -> None:
        """``segment`` is merged: the webdb knows its URLs now."""
        self._listed.pop(segment, None)
        for url in [u for u, holder in self._hops.items() if holder == segment]:
            del self._hops[url]


def made_by_fetch(entry: dict[str, Any]) -> bool:
    """Whether an entry is one the fetch made itself (a redirect hop, a followed outlink), not a fetchlist row."""
    return bool(entry.get("redirect_hop") or entry.get("follow_depth"))


class RecentKeys:
    """hash -> bool for about the last ``size`` keys put (between half and all of them): two generations of
    plain dicts, the older dropped whole when the newer fills. An OrderedDict trimmed one key at a time grows
    its table as it goes (43 MB at 200,000 int keys, against ~17 MB here), and a dict trimmed from the front
    is quadratic."""

    __slots__ = ("half", "new", "old")

    def __init__(self, size: int) -> None:
        self.half = max(1, size // 2)
        self.new: dict[int, bool] = {}
        self.old: dict[int, bool] = {}

    def put(self, key: int, value: bool) -> None:
        self.new[key] = value
        if len(self.new) >= self.half:
            self.old, self.new = self.new, {}

    def get(self, key: int) -> bool | None:
        value = self.new.get(key)
        return self.old.get(key) if value is None else value

    def __contains__(self, key: int) -> bool:
        return key in self.new or key in self.old


class RedirectPolicy:
    def __init__(self, cfg: CrawlerConfig, held: HeldUrls | None = None, segment: str = "") -> None:
        self.max_redirects = cfg.http.max_redirects
        self.normalize = Normalizer.from_config(cfg).normalize
        urls_cfg = getattr(cfg, "urls", None)
        self.filters = (UrlFilters(urls_cfg, ignore_external=cfg.db.ignore_external_links)
                        if UrlFilters is not None and urls_cfg is not None else None)
        # hash(URL) -> taken as a redirect hop? (bounded: past it, a rare URL may be fetched twice; updatedb keeps
        # the latest). Keyed by the str's own cached hash, not the URL: keeping the URL strings alive was half of
        # this memory, and a collision of two 64-bit keyed hashes in one fetch is negligible. In sorted runs, not
        # dicts: ~3 MB at the bound instead of ~25 (compactkeys.py).
        self._taken = CompactKeys(_REMEMBERED)
        self.known = KnownFetched()  # the fetcher loads the webdb's not-due URLs at start
        # URLs a cut-off run of this segment already committed: their rows are there, a hop must not add another.
        self.committed = KnownFetched()
        self.held = held  # shared by the daemon's concurrent fetches; None for a fetch on its own
        self.segment = segment

    def _remember(self, url: str, as_hop: bool) -> None:
        self._taken.put(hash(url), as_hop)

    def take(self, entry: dict[str, Any]) -> bool:
        """False when a fetchlist entry was already fetched as another URL's redirect hop in this run."""
        if made_by_fetch(entry):
            return True  # claimed when it was queued
        if self._taken.get(hash(entry["url"])):
            return False
        self._remember(entry["url"], False)
        return True

    def claim(self, url: str) -> bool:
        """Take ``url`` for an outlink followed in this fetch; False if this fetch took it already (an entry,
        a hop, a committed row) or another running segment of the daemon holds it."""
        if self._taken_here(url) or self._holder(url) is not None:
            return False
        self._take(url)
        return True

    def _taken_here(self, url: str) -> bool:
        return hash(url) in self._taken or url in self.committed

    def _holder(self, url: str) -> str | None:
        """Another running segment of the daemon that lists ``url`` or took it."""
        return self.held.holder(url, self.segment) if self.held is not None else None

    def _take(self, url: str) -> None:
        """``url`` is this fetch's now (a redirect hop or a followed outlink), for the daemon's other segments too."""
        self._remember(url, True)
        if self.held is not None:
            self.held.take_hop(url, self.segment)

    def held_elsewhere(self, entry: dict[str, Any]) -> str | None:
        """The running segment that already took this fetchlist entry as a redirect hop, if any."""
        if self.held is None or made_by_fetch(entry):
            return None
        return self.held.hop_holder(entry["url"], self.segment)

    def target(self, location: str | None, base: str) -> str:
        """The normalized absolute target; raises crawler.urls.normalize.InvalidUrl."""
        return self.normalize(location or "", base=base)

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
        if self._taken_here(target):
            return None, "redirect target already fetched in this segment"
        if target in self.known:
            return None, "redirect target fetched in an earlier round and not due"
        holder = self._holder(target)
        if holder is not None:
            return None, f"redirect target in segment {holder}, which this daemon is fetching"
        self._take(target)
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
