"""HTML parser on selectolax's Lexbor backend: decoding, title/text, outlinks, meta directives."""

from __future__ import annotations

import codecs
import functools
import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawler.parsers.base import Outlink, ParseResult
from crawler.urls.normalize import normalize

_LINKS = "a[href], area[href], frame[src], iframe[src], link[href]"
_FOLLOWED_LINK_RELS = frozenset({"alternate", "next", "prev"})
# Never rendered as text. <title> is reported on its own and lands in <body> when a
# stray <noscript><img> in <head> closes the head early; <iframe> children are only
# fallback markup.
_INVISIBLE = ["script", "style", "noscript", "template", "title", "iframe", "noembed"]
# Phrasing elements: unwrapping them before merging text nodes keeps "wor<b>ld</b>"
# one word, while text separated by block boundaries (<p>, <li>, <br>) gets a space.
# One Python pass over the body finds them faster than a CSS list (one tree walk per name).
# fmt: off
_INLINE = frozenset((
    "a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font", "i", "ins",
    "kbd", "label", "mark", "nobr", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup",
    "time", "tt", "u", "var", "wbr",
))
# fmt: on
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([^\"';,\s]+)", re.I)
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([a-z0-9_.:-]+)", re.I)
_META_SCAN = 2048
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# The WHATWG Encoding Standard decodes these labels as a superset, because pages
# so labelled routinely use its extra characters (curly quotes in "iso-8859-1").
_SUPERSETS = {"iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254", "gb2312": "gbk"}
# WHATWG "refresh" content: a delay, optional ';'/',', optional "url=", then the URL.
_REFRESH = re.compile(r"\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?(.*)", re.I | re.S)


def collapse_ws(s: str) -> str:
    """Collapse every whitespace run (Unicode-aware, so NBSP too) to one space and strip."""
    return " ".join(s.split())


@functools.lru_cache(maxsize=256)
def _codec(label: str) -> str | None:
    """Python codec name for a charset label, or None when unknown or not a text codec."""
    try:
        name = codecs.lookup(label.strip().lower()).name
        b"".decode(name)  # rejects pseudo-codecs such as base64 or rot13, which a page could name
    except (LookupError, ValueError):
        return None
    return _SUPERSETS.get(name, name)


def _decode(body: bytes, content_type: str | None) -> tuple[str, str]:
    # A BOM wins over the header, as in the HTML Standard: it is evidence in the bytes
    # themselves, while a header charset is often a server-wide default.
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(name, "replace"), name
    name = None
    if content_type and (m := _HEADER_CHARSET.search(content_type)):
        name = _codec(m.group(1))
    if name is None and (m := _META_CHARSET.search(body, 0, _META_SCAN)):
        name = _codec(m.group(1).decode("ascii"))
        if name and name.startswith(("utf-16", "utf-32")):
            name = "utf-8"  # a meta tag readable as ASCII proves the page is not UTF-16/32
    name = name or "utf-8"
    try:
        return body.decode(name, "replace"), name
    except (UnicodeError, LookupError):  # codecs like idna cannot do errors="replace"
        return body.decode("utf-8", "replace"), "utf-8"


def _refresh_target(content: str) -> str | None:
    m = _REFRESH.match(content)
    target = m.group(1).strip() if m else ""
    if target[:1] in ("'", '"'):
        quote, target = target[0], target[1:]
        end = target.find(quote)
        target = target[:end] if end >= 0 else target
    return target.strip() or None


def _resolve(raw: str | None, base: str) -> str | None:
    """Absolute normalized URL, or None when the normalizer rejects it."""
    if raw is None:
        return None
    try:  # normalize() also trims and drops tabs/newlines, as browsers do
        return normalize(raw, base)
    except ValueError:  # InvalidUrl, and anything else one bad href may raise
        return None


def _base_url(tree: LexborHTMLParser, url: str) -> str:
    node = tree.css_first("base[href]")
    # Like the HTML Standard ignoring javascript:/data: bases, an unusable base is ignored.
    return (_resolve(node.attributes.get("href"), url) if node is not None else None) or url


def _anchor(node: LexborNode, tag: str) -> str:
    if tag == "a":
        text = collapse_ws(node.text())
        if not text and (img := node.css_first("img[alt]")) is not None:
            text = collapse_ws(img.attributes.get("alt") or "")  # image links: alt is the anchor
        return text
    if tag == "area":
        return collapse_ws(node.attributes.get("alt") or "")
    return ""


class HtmlParser:
    """Parser for text/html and application/xhtml+xml; never raises on bad input."""

    def __init__(self, agent_name: str = "", follow_nofollow_links: bool = False) -> None:
        names = {"robots"}
        if agent_name.strip():
            names.add(agent_name.strip().lower())
        self._robot_names = frozenset(names)
        self._follow_nofollow = follow_nofollow_links

    def parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        if not body:
            return ParseResult(status="success")
        try:
            return self._parse(body, url, content_type)
        except Exception as exc:  # one malformed page must never take down a parse worker
            return ParseResult(status="failed", reason=f"{type(exc).__name__}: {exc}")

    def _parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        text, charset = _decode(body, content_type)
        # Lexbor reads UTF-8 bytes about twice as fast as a str.
        tree = LexborHTMLParser(text.encode("utf-8"))
        res = ParseResult(status="success", metadata={"charset": charset})
        base = _base_url(tree, url)
        self._read_meta(tree, res, base)
        root = tree.root
        if root is not None and (lang := collapse_ws(root.attributes.get("lang") or "")):
            res.metadata["lang"] = lang
        if (title := tree.css_first("title")) is not None:
            res.title = collapse_ws(title.text())
        res.outlinks = self._outlinks(tree, res, base)
        # Text last: it mutates the tree.
        if tree.body is not None:
            tree.strip_tags(_INVISIBLE, recursive=True)
            body_node = tree.body
            for node in [n for n in body_node.traverse() if n.tag in _INLINE]:
                node.unwrap()
            tree.merge_text_nodes()
            res.text = collapse_ws(body_node.text(separator=" "))
        return res

    def _read_meta(self, tree: LexborHTMLParser, res: ParseResult, base: str) -> None:
        for node in tree.css("meta[content]"):
            attrs = node.attributes
            content = attrs.get("content") or ""
            name = (attrs.get("name") or "").strip().lower()
            if name in self._robot_names:
                # Directives from every matching tag add up: the most restrictive wins.
                for directive in content.lower().replace(",", " ").split():
                    if directive in ("noindex", "none"):
                        res.noindex = True
                    if directive in ("nofollow", "none"):
                        res.nofollow = True
            elif name in ("description", "keywords"):
                if name not in res.metadata and (value := collapse_ws(content)):
                    res.metadata[name] = value
            elif res.refresh is None and (attrs.get("http-equiv") or "").strip().lower() == "refresh":
                res.refresh = _resolve(_refresh_target(content), base)

    def _outlinks(self, tree: LexborHTMLParser, res: ParseResult, base: str) -> list[Outlink]:
        follow = not res.nofollow
        resolved: dict[str, str | None] = {}  # pages repeat hrefs; normalizing is the costly part
        found: dict[str, Outlink] = {}  # insertion order = document order, first anchor kept
        for node in tree.css(_LINKS):
            tag = node.tag
            attrs = node.attributes
            rel = attrs.get("rel")
            rels = rel.lower().split() if rel else ()
            if tag == "link":
                if res.canonical is None and "canonical" in rels:
                    res.canonical = _resolve(attrs.get("href"), base)
                if "stylesheet" in rels or not _FOLLOWED_LINK_RELS.intersection(rels):
                    continue
            if not follow or ("nofollow" in rels and not self._follow_nofollow):
                continue
            raw = attrs.get("src" if tag in ("frame", "iframe") else "href")
            if raw is None:
                continue
            if raw in resolved:
                target = resolved[raw]
            else:
                target = resolved[raw] = _resolve(raw, base)
            if target is not None and target not in found:
                found[target] = Outlink(target, _anchor(node, tag))
        if follow and res.refresh is not None and res.refresh not in found:
            found[res.refresh] = Outlink(res.refresh, "")
        return list(found.values())
