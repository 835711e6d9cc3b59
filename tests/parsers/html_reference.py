"""HtmlParser as it stood before its per-page CPU work was cut (commit a6102ce), kept as the reference
the faster parser must equal, field for field (test_html_equivalence.py). One change of meaning was made
to both since: comments, empty inline elements and unknown elements no longer split the text around them."""

# ruff: noqa
from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawler.config import CrawlerConfig
from crawler.parsers.base import Outlink, ParseResult
from crawler.parsers.directives import Robots, parse_directives, robot_names
from crawler.parsers.encoding import decode

# What did not change is shared with the parser; what changed (the tree walks, collapse_ws, the
# body's decoding) is kept here as it was.
from crawler.parsers.html import (
    FIRST_UNKNOWN_ID, _ABSOLUTE, _COMMENT_ID, _INLINE_IDS, _INVISIBLE, _OTHER_SCHEMES, _OTHER_WS, _SPACE_RUN, _TARGET_ATTR,
    DEFAULT_TAGS, _default_link_rels, _refresh_target,
)
from crawler.urls.normalize import PLAIN

DEFAULT_LINK_RELS = _default_link_rels()  # html.py reads it from the config's model on use (no pydantic there)

# The parser resolved hrefs shared by pages through an LRU over (href, base) then, as Normalizer.resolve_cached.
_resolve, _resolve_shared = PLAIN.resolve, lru_cache(maxsize=16384)(PLAIN.resolve)


def collapse_ws(s: str) -> str:
    """Collapse every whitespace run (Unicode-aware, so NBSP too) to one space and strip."""
    if len(s) < 256:
        return " ".join(s.split())
    # The same result without a str object per word (a page's text has thousands; split is ~30 ns
    # each): `c in s` is a memchr, and free for a character wider than any in s (a Latin-1 text
    # scans for 11 of these, not 28). Page text mostly has single spaces left after the separator.
    for c in _OTHER_WS:
        if c in s:
            s = s.replace(c, " ")
    if "  " in s:
        s = _SPACE_RUN.sub(" ", s)
    return s.strip(" ")


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
        # Lexbor reads UTF-8 bytes about twice as fast as a str. A UTF-8 body decoded without a
        # replacement character (free to check on a text with no character above U+00FF) is those bytes.
        utf8 = body if charset == "utf-8" and source != "bom" and "\ufffd" not in text else text.encode("utf-8")
        tree = LexborHTMLParser(utf8)
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
            for node in [n for n in body_node.traverse() if n.tag_id == _COMMENT_ID]:
                node.decompose()
            for node in [n for n in body_node.traverse() if n.tag_id in _INLINE_IDS or n.tag_id >= FIRST_UNKNOWN_ID]:
                node.unwrap(delete_empty=True)
            tree.merge_text_nodes()
            # Stripping each text node and skipping blank ones (indentation) leaves the same words
            # with fewer whitespace runs for collapse_ws.
            res.text = collapse_ws(body_node.text(separator=" ", strip=True, skip_empty=True))
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
        # An absolute URL, or one starting with a slash (a path from the root, or `//host/...`),
        # resolves the same on every page with this base's origin.
        parts = PLAIN.base_parts(base)
        origin = parts[1] if parts is not None else None
        root = origin + "/" if origin is not None else None
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
            elif root is None:
                target = resolved[raw] = _resolve(raw, base)
            elif raw.startswith(_OTHER_SCHEMES):  # what normalize() would reject, without its regex and raise
                target = resolved[raw] = None
            elif raw.startswith(_ABSOLUTE):
                target = resolved[raw] = _resolve_shared(raw, None)
            elif raw[:1] in ("/", "\\"):
                target = resolved[raw] = _resolve_shared(raw, root)
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
