"""RSS (0.9x, 1.0/RDF, 2.0) and Atom feeds: each item's link is an outlink, its title the anchor.

lxml rather than feedparser: the crawler needs only titles, links and dates,
and one safe XML parser (see xmlsafe) serves sitemaps and feeds alike, at a
fraction of feedparser's cost per document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from selectolax.lexbor import LexborHTMLParser

from crawler.parsers.base import Outlink, ParseResult
from crawler.parsers.html import collapse_ws
from crawler.parsers.xmlsafe import (
    XmlDocumentParser,
    child_text,
    children,
    local,
    outlink_metadata,
    parse_xml,
    resolve,
)
from crawler.urls.normalize import Normalizer

if TYPE_CHECKING:  # the parse side runs on the config's values, not its models (crawler/fetcher/parsepool.py)
    from crawler.config import CrawlerConfig

KINDS = {"rss": "item", "rdf": "item", "feed": "entry"}  # root element -> item element
_RDF_ABOUT = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}about"
_DATES = ("updated", "pubDate", "published", "date", "modified")
MAX_ITEMS = 10_000


def _plain(markup: str) -> str:
    # Descriptions often carry escaped HTML: index what a reader would see, not the tags.
    if "<" not in markup:
        return markup
    tree = LexborHTMLParser(markup)
    return collapse_ws(tree.body.text(separator=" ")) if tree.body is not None else ""


def _atom_link(entry, base: str, n: Normalizer) -> str | None:
    for link in children(entry, "link"):
        if (link.get("rel") or "alternate").strip().lower() == "alternate" and link.get("href"):
            # xml:base on the entry or its ancestors, else the feed's URL.
            return resolve(link.get("href"), (resolve(link.base, base, n) if link.base else None) or base, n)
    return None


def _rss_link(item, base: str, n: Normalizer) -> str | None:
    if target := resolve(child_text(item, "link"), base, n):
        return target
    for guid in children(item, "guid"):
        if (guid.get("isPermaLink") or "true").strip().lower() != "false":
            return resolve(collapse_ws(guid.text or ""), base, n)
    return resolve(item.get(_RDF_ABOUT), base, n)


class FeedParser(XmlDocumentParser):
    """Parser for RSS and Atom; declines (status unparsed) any other XML, so the next parser may try."""

    kinds = KINDS
    what = "feed"

    def _parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        root = parse_xml(body, content_type)
        kind = local(root).lower() if root is not None else ""
        if kind not in KINDS:
            return ParseResult(status="failed", reason="feed is not well-formed XML")
        atom = kind == "feed"
        channel = root if atom else next(children(root, "channel"), root)
        title = child_text(channel, "title")
        texts = [title, _plain(child_text(channel, "subtitle", "description"))]
        # RSS 2.0 nests items in <channel>; RSS 1.0 puts them beside it; some feeds do either.
        items = [
            *children(channel, KINDS[kind]),
            *(children(root, KINDS[kind]) if channel is not root else ()),
        ]
        found: dict[str, Outlink] = {}
        fields: dict[str, dict[str, str]] = {}
        for item in items[:MAX_ITEMS]:
            anchor = _plain(child_text(item, "title"))
            texts += [anchor, _plain(child_text(item, "summary", "description", "content", "encoded"))]
            target = _atom_link(item, url, self.normalizer) if atom else _rss_link(item, url, self.normalizer)
            if target is None or target in found:
                continue
            found[target] = Outlink(target, anchor)
            if date := child_text(item, *_DATES)[:64]:
                fields[target] = {"lastmod": date}
        metadata = {
            "feed": "atom" if atom else kind,
            "feed_items": str(len(items)),
            **outlink_metadata(fields),
        }
        if description := texts[1]:
            metadata["description"] = description
        return ParseResult(
            status="success",
            title=_plain(title),
            text=collapse_ws(" ".join(t for t in texts if t)),
            outlinks=list(found.values()),
            metadata=metadata,
        )


def create(cfg: CrawlerConfig) -> FeedParser:
    return FeedParser(Normalizer.from_config(cfg))
