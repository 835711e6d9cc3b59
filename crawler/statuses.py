"""The statuses a fetch, the crawl database and a parse record (DESIGN 6a), and the parse_data metadata keys.

Apart from crawler/models.py's schemas so that what only needs a status (the parse processes of
``fetcher.parse_processes`` among them) does not import pyarrow.
"""

from __future__ import annotations

from enum import StrEnum


class FetchStatus(StrEnum):
    """What the fetcher writes for one URL (DESIGN 6a)."""

    SUCCESS = "success"
    NOTMODIFIED = "notmodified"
    REDIRECT_PERM = "redirect_perm"
    REDIRECT_TEMP = "redirect_temp"
    GONE = "gone"
    ROBOTS_DENIED = "robots_denied"
    RETRY = "retry"
    FAILED = "failed"


class DbStatus(StrEnum):
    """A URL's state in the crawl database."""

    UNFETCHED = "unfetched"
    FETCHED = "fetched"
    NOTMODIFIED = "notmodified"
    GONE = "gone"
    REDIRECT_TEMP = "redirect_temp"
    REDIRECT_PERM = "redirect_perm"
    RETRY = "retry"
    DUPLICATE = "duplicate"


class ParseStatus(StrEnum):
    SUCCESS = "success"
    FAILED = "failed"
    UNPARSED = "unparsed"


# parse_data metadata key: how many of the last outlinks are robots.txt Sitemap: URLs the fetcher appended
# (fetcher/records.add_robots_sitemaps). Their anchor, "sitemap", may also be a page's own link text, so
# updatedb tells them by this count: it never cuts them.
ROBOTS_SITEMAPS = "robots_sitemaps"
