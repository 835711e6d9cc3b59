"""HTML parser on selectolax's Lexbor backend: decoding, title/text, outlinks, meta directives."""

from __future__ import annotations

import re
from collections.abc import Iterable

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawler.config import CrawlerConfig
from crawler.parsers.base import Outlink, ParseResult
from crawler.parsers.directives import Robots, parse_directives, robot_names
from crawler.parsers.encoding import decode
from crawler.urls.normalize import normalize

# Where each outlink element keeps its target.
_TARGET_ATTR = {"a": "href", "area": "href", "frame": "src", "iframe": "src", "link": "href"}
DEFAULT_TAGS = tuple(_TARGET_ATTR)
DEFAULT_LINK_RELS = ("alternate", "next", "prev")
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


def _tag_ids(names: Iterable[str]) -> frozenset[int]:
    # Comparing Lexbor's integer tag ids skips building a str per node: half the cost of the walk.
    doc = LexborHTMLParser("<body>" + "".join(f"<{n}></{n}>" for n in names) + "</body>")
    return frozenset(node.tag_id for node in doc.body.traverse() if node.tag in names)


_INLINE_IDS = _tag_ids(_INLINE)
# WHATWG "refresh" content: a delay, optional ';'/',', optional "url=", then the URL.
_REFRESH = re.compile(r"\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?(.*)", re.I | re.S)


def collapse_ws(s: str) -> str:
    """Collapse every whitespace run (Unicode-aware, so NBSP too) to one space and strip."""
    return " ".join(s.split())


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

    def __init__(
        self,
        agent_name: str = "",
        follow_nofollow_links: bool = False,
        outlink_tags: Iterable[str] = DEFAULT_TAGS,
        link_rels: Iterable[str] = DEFAULT_LINK_RELS,
    ) -> None:
        self._robot_names = robot_names(agent_name)
        self._follow_nofollow = follow_nofollow_links
        self._tags = frozenset(t.lower() for t in outlink_tags)
        self._link_rels = frozenset(r.lower() for r in link_rels)
        # <link> is always selected: rel=canonical is read from it even when it is no outlink.
        self._selector = ", ".join(f"{t}[{_TARGET_ATTR[t]}]" for t in sorted(self._tags | {"link"}))

    def parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        if not body:
            return ParseResult(status="success")
        try:
            return self._parse(body, url, content_type)
        except Exception as exc:  # one malformed page must never take down a parse worker
            return ParseResult(status="failed", reason=f"{type(exc).__name__}: {exc}")

    def _parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        text, charset, source = decode(body, content_type, html=True)
        # Lexbor reads UTF-8 bytes about twice as fast as a str.
        tree = LexborHTMLParser(text.encode("utf-8"))
        res = ParseResult(status="success", metadata={"charset": charset, "charset_source": source})
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
            for node in [n for n in body_node.traverse() if n.tag_id in _INLINE_IDS]:
                node.unwrap()
            tree.merge_text_nodes()
            res.text = collapse_ws(body_node.text(separator=" "))
        return res

    def _read_meta(self, tree: LexborHTMLParser, res: ParseResult, base: str) -> None:
        robots = Robots()
        for node in tree.css("meta[content]"):
            attrs = node.attributes
            content = attrs.get("content") or ""
            name = (attrs.get("name") or "").strip().lower()
            if name in self._robot_names:
                robots = robots | parse_directives(content)
            elif name in ("description", "keywords"):
                if name not in res.metadata and (value := collapse_ws(content)):
                    res.metadata[name] = value
            elif res.refresh is None and (attrs.get("http-equiv") or "").strip().lower() == "refresh":
                res.refresh = _resolve(_refresh_target(content), base)
        res.noindex, res.nofollow = robots

    def _outlinks(self, tree: LexborHTMLParser, res: ParseResult, base: str) -> list[Outlink]:
        follow = not res.nofollow
        tags, link_rels = self._tags, self._link_rels
        resolved: dict[str, str | None] = {}  # pages repeat hrefs; normalizing is the costly part
        found: dict[str, Outlink] = {}  # insertion order = document order, first anchor kept
        for node in tree.css(self._selector):
            tag = node.tag
            attrs = node.attributes
            rel = attrs.get("rel")
            rels = rel.lower().split() if rel else ()
            if tag == "link":
                if res.canonical is None and "canonical" in rels:
                    res.canonical = _resolve(attrs.get("href"), base)
                if "link" not in tags or "stylesheet" in rels or link_rels.isdisjoint(rels):
                    continue
            if not follow or ("nofollow" in rels and not self._follow_nofollow):
                continue
            raw = attrs.get(_TARGET_ATTR[tag])
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


def create(cfg: CrawlerConfig) -> HtmlParser:
    return HtmlParser(
        agent_name=cfg.http.agent_name,
        follow_nofollow_links=cfg.parse.follow_nofollow_links,
        outlink_tags=cfg.parse.outlink_tags,
        link_rels=cfg.parse.link_rels,
    )
