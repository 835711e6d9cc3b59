"""The contract between the fetcher and content parsers."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field

if typing.TYPE_CHECKING:
    from crawler.config import CrawlerConfig


# Root element -> entry element of a sitemap. Here, not in the sitemap parser, for the jobs' SQL (a page
# is a sitemap when the parser said so): importing that parser in the fetch process loads lxml for nothing.
SITEMAP_KINDS = {"urlset": "url", "sitemapindex": "sitemap"}


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, 475 ns a link against
# 187 for this one (a page has dozens, the parsers make them and rows.py turns them into tuples at once).
@dataclass(slots=True)
class Outlink:
    url: str
    anchor: str


@dataclass(slots=True)
class ParseResult:
    status: str  # "success" | "failed" | "unparsed", as written to parse_data
    title: str = ""
    text: str = ""
    outlinks: list[Outlink] = field(default_factory=list)
    noindex: bool = False
    nofollow: bool = False
    canonical: str | None = None
    refresh: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)  # charset, content_type, description, lang, ...
    reason: str | None = None  # why status is "failed" or "unparsed"


class Parser(typing.Protocol):
    """Turns one response body into a ParseResult and never raises on bad input.

    A parser that does not recognise the content (XML that is not its kind)
    returns status "unparsed", so the next parser listed for the type may try.
    """

    def parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult: ...


class ParserFactory(typing.Protocol):
    """What a ``crawler.parsers`` registry entry names: builds a parser from the config."""

    def __call__(self, cfg: CrawlerConfig) -> Parser: ...
