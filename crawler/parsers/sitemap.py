"""XML sitemaps and sitemap indexes (sitemaps.org): every <loc> becomes an outlink.

A sitemap's URLs and a sitemap index's child sitemaps are both outlinks, so the
crawl fetches the children (gzip ones included: dispatch unpacks gzip bodies)
and then the pages they list. lastmod, changefreq and priority are kept per
outlink in the page metadata (``outlink_metadata``, JSON), for scheduling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawler.parsers.base import SITEMAP_KINDS, Outlink, ParseResult
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

KINDS = SITEMAP_KINDS
MAX_ENTRIES = 50_000  # the protocol's limit per file; more is not a sitemap a crawler should trust
_FIELD_MAX = 64


def _priority(raw: str) -> str | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return raw if 0.0 <= value <= 1.0 else None


class SitemapParser(XmlDocumentParser):
    """Parser for sitemap XML; declines (status unparsed) any other XML, so the next parser may try."""

    kinds = KINDS
    what = "sitemap"

    def _parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        root = parse_xml(body, content_type)
        kind = local(root) if root is not None else ""
        if kind not in KINDS:
            return ParseResult(status="failed", reason="sitemap is not well-formed XML")
        found: dict[str, Outlink] = {}
        fields: dict[str, dict[str, str]] = {}
        entries = 0
        for entry in children(root, KINDS[kind]):
            if entries >= MAX_ENTRIES:
                break
            target = resolve(child_text(entry, "loc"), url, self.normalizer)
            if target is None or target in found:
                continue
            found[target] = Outlink(target, "")
            entries += 1
            meta = {}
            if lastmod := child_text(entry, "lastmod")[:_FIELD_MAX]:
                meta["lastmod"] = lastmod
            if changefreq := child_text(entry, "changefreq")[:_FIELD_MAX].lower():
                meta["changefreq"] = changefreq
            if (priority := _priority(child_text(entry, "priority"))) is not None:
                meta["priority"] = priority
            fields[target] = meta
        metadata = {"sitemap": kind, "sitemap_entries": str(entries), **outlink_metadata(fields)}
        if entries >= MAX_ENTRIES:
            metadata["sitemap_truncated"] = "true"
        return ParseResult(status="success", outlinks=list(found.values()), metadata=metadata)


def create(cfg: CrawlerConfig) -> SitemapParser:
    return SitemapParser(Normalizer.from_config(cfg))
