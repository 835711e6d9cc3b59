"""Safe, forgiving XML for sitemaps and feeds (lxml / libxml2).

Crawled XML is untrusted: entities are never expanded (no billion laughs, no
external files), no DTD or network access, libxml2's size limits stay on; and
it is often broken, so the parser recovers what it can instead of giving up.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

from crawler.parsers.base import ParseResult
from crawler.parsers.encoding import header_charset
from crawler.parsers.sniff import xml_root
from crawler.urls.normalize import PLAIN, Normalizer

if TYPE_CHECKING:
    from lxml import etree

_LEADING = b"\xef\xbb\xbf \t\r\n\x0c"


def root_name(body: bytes) -> str | None:
    """Local name of the root element (namespace prefix dropped), read without parsing the document."""
    root = xml_root(body.lstrip(_LEADING))
    return root.rpartition(":")[2] if root else None


def parse_xml(body: bytes, content_type: str | None) -> etree._Element | None:
    """The root element, recovered from malformed input; None when nothing could be read."""
    # Imported by the first XML document: every parse process builds these parsers, and lxml is ~4 MB
    # resident in each one that never sees a sitemap or feed (most of a crawl's pages are HTML).
    from lxml import etree

    # A charset in the header wins over the XML declaration (RFC 7303); lxml otherwise reads the declaration.
    parser = etree.XMLParser(
        encoding=header_charset(content_type),
        recover=True,
        resolve_entities=False,
        load_dtd=False,
        no_network=True,
        remove_comments=True,
        remove_pis=True,
        huge_tree=False,
    )
    try:
        return etree.fromstring(body, parser)
    except (etree.LxmlError, ValueError, LookupError):
        return None


def local(element: etree._Element) -> str:
    """Element name without namespace; '' for entity references and other non-elements."""
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2]


def children(element: etree._Element, name: str) -> Iterator[etree._Element]:
    for child in element:
        if local(child) == name:
            yield child


def child_text(element: etree._Element, *names: str) -> str:
    """Collapsed text of the first child named one of ``names`` (in that order of preference)."""
    for name in names:
        for child in children(element, name):
            text = " ".join("".join(child.itertext()).split())
            if text:
                return text
    return ""


def resolve(raw: str | None, base: str, normalizer: Normalizer = PLAIN) -> str | None:
    """The normalized absolute URL of an entry's text, or None when empty or rejected."""
    return normalizer.resolve(raw, base) if raw else None


def outlink_metadata(entries: dict[str, dict[str, str]]) -> dict[str, str]:
    """Per-outlink fields (lastmod, priority, ...) as one JSON page-metadata value, since the
    outlinks column holds only url and anchor: ``{"outlink_metadata": "{url: {...}}"}``."""
    kept = {url: fields for url, fields in entries.items() if fields}
    return {"outlink_metadata": json.dumps(kept, ensure_ascii=False, separators=(",", ":"))} if kept else {}


class XmlDocumentParser:
    """The shared front of the XML parsers: decline documents of other root elements, never raise.

    Declining (status unparsed) lets the next parser in ``parse.plugins`` try, so
    one MIME type (application/xml) can list both sitemap and feed parsers.
    """

    kinds: dict[str, str]  # root element -> the element that holds one entry
    what: str  # "sitemap", "feed": used in the reasons

    def __init__(self, normalizer: Normalizer = PLAIN) -> None:
        self.normalizer = normalizer  # the crawl's (urls.*): entries are spelled as every other URL

    def parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        kind = root_name(body)
        if kind not in self.kinds:
            return ParseResult(status="unparsed", reason=f"not a {self.what} (root element {kind or 'missing'})")
        try:
            return self._parse(body, url, content_type)
        except Exception as exc:  # one bad document must never take down a parse worker
            return ParseResult(status="failed", reason=f"{type(exc).__name__}: {exc}")

    def _parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        raise NotImplementedError
