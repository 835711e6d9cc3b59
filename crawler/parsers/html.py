"""HTML parser on selectolax's Lexbor backend: decoding, title/text, outlinks, meta directives."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import stringzilla
from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawler.parsers.base import Outlink, ParseResult
from crawler.parsers.directives import Robots, parse_directives, robot_names
from crawler.parsers.encoding import decode_utf8
from crawler.parsers.linkcache import SharedTargets
from crawler.urls.normalize import PLAIN, Normalizer

if TYPE_CHECKING:  # the parse processes never load the config's models (pydantic): they get its settings as plain values
    from crawler.config import CrawlerConfig

# Where each outlink element keeps its target.
_TARGET_ATTR = {"a": "href", "area": "href", "frame": "src", "iframe": "src", "link": "href"}
DEFAULT_TAGS = tuple(_TARGET_ATTR)


def _default_link_rels() -> tuple[str, ...]:
    """parse.link_rels' default: the navigational <link rel> types (the reason is beside the key)."""
    from crawler.config import ParseConfig

    return tuple(ParseConfig.model_fields["link_rels"].default)


_ABSOLUTE = ("http://", "https://")
_OTHER_SCHEMES = ("javascript:", "mailto:", "tel:", "data:")
# Never rendered as text. <title> is reported on its own and lands in <body> when a
# stray <noscript><img> in <head> closes the head early; <iframe> children are only
# fallback markup.
_INVISIBLE = ["script", "style", "noscript", "template", "title", "iframe", "noembed"]
# Phrasing elements: unwrapping them before merging text nodes keeps "wor<b>ld</b>"
# one word, while text separated by block boundaries (<p>, <li>, <br>) gets a space.
# One Python pass over the body finds them faster than a CSS list (lexbor matches each selector in turn).
# Obsolete ones too: DocBook's HTML (PostgreSQL's, GTK's, libstdc++'s manuals) wraps every
# abbreviation in <acronym>, and "(WAL)" must not become "( WAL )".
# fmt: off
_INLINE = frozenset((
    "a", "abbr", "acronym", "b", "bdi", "bdo", "big", "blink", "cite", "code", "data", "del", "dfn", "em",
    "font", "i", "ins", "kbd", "label", "mark", "nobr", "q", "s", "samp", "small", "span", "strike",
    "strong", "sub", "sup", "time", "tt", "u", "var", "wbr",
))
# fmt: on


def _tag_ids(names: Iterable[str]) -> frozenset[int]:
    # Comparing Lexbor's integer tag ids skips building a str per node: half the cost of the walk.
    doc = LexborHTMLParser("<body>" + "".join(f"<{n}></{n}>" for n in names) + "</body>")
    return frozenset(node.tag_id for node in doc.body.traverse() if node.tag in names)


def _tag_id(name: str) -> int:
    for markup in (f"<body><{name}></{name}>", f"<frameset><{name}>"):  # <frame> parses only in a frameset
        for node in LexborHTMLParser(markup).root.traverse():
            if node.tag == name:
                return node.tag_id
    raise ValueError(f"lexbor has no element {name}")


_INLINE_IDS = _tag_ids(_INLINE)
# lexbor numbers the elements it knows from 0 to a few hundred (LXB_TAG__LAST_ENTRY) and gives one it does
# not know the address of its name's entry. An unknown element (a web component's <time-ago>, gtk-doc's
# <GTKDOCLINK> around a link's words) renders inline in a browser, CSS's initial display: it is unwrapped.
FIRST_UNKNOWN_ID = 1 << 16
_LINK_OF_ID = {_tag_id(tag): (tag, attr) for tag, attr in _TARGET_ATTR.items()}  # an outlink element's tag and target
_BASE_ID, _META_ID, _TITLE_ID = _tag_id("base"), _tag_id("meta"), _tag_id("title")
# What one walk of the document collects each element for (an element may play two roles: <a> is
# an outlink and inline, <title> the title and invisible). Each css() call would walk the whole
# tree again (lexbor matches a selector list one selector at a time), strip_tags once per name.
_LINK, _HEAD, _INLINE_ROLE, _INVISIBLE_ROLE = 1, 2, 4, 8
_ROLES: dict[int, int] = {}
for _id in _INLINE_IDS:
    _ROLES[_id] = _INLINE_ROLE
for _id in map(_tag_id, _INVISIBLE):
    _ROLES[_id] = _ROLES.get(_id, 0) | _INVISIBLE_ROLE
# A comment between two runs of text would keep them apart as an element does: Texinfo writes
# `<code>M > nd</code><!-- /@w -->)`, React's server rendering `Hello<!-- -->, world`. The walk meets
# comments anyway (traverse() yields them), so deleting them costs one call each.
_COMMENT_ID = next(n.tag_id for n in LexborHTMLParser("<body><!--c-->").root.traverse() if n.tag == "-comment")
_ROLES[_COMMENT_ID] = _INVISIBLE_ROLE
for _id in (_BASE_ID, _META_ID, _TITLE_ID):
    _ROLES[_id] = _ROLES.get(_id, 0) | _HEAD
# The walk's list for each role, by its place in the tuple of appends in HtmlParser._parse.
_SLOTS = {_LINK: 0, _HEAD: 1, _INLINE_ROLE: 2, _INVISIBLE_ROLE: 3, _LINK | _INLINE_ROLE: 0}
_SEVERAL = 4
_SLASHES = ("/", "\\")
_UNSEEN = object()  # not in a table (None there is a rejected href)
# First characters, but letters and digits, of a path relative to the page's folder (what whitespace
# stripping cannot turn into another form of reference: '/x', '?q', '#f', '').
_PATH_FIRST = frozenset("._-~%")
# WHATWG "refresh" content: a delay, optional ';'/',', optional "url=", then the URL.
_REFRESH = re.compile(r"\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?(.*)", re.I | re.S)


# Every character str.split() splits on, but the space (none is above U+3000).
_OTHER_WS = tuple(c for c in map(chr, range(0x3001)) if c.isspace() and c != " ")
# The Latin-1 ones, as the bytes of a Latin-1 str: what one StringZilla pass looks for.
_LATIN1_OTHER_WS = "".join(c for c in _OTHER_WS if c <= "\xff")
_LATIN1_OTHER_WS_BYTES = _LATIN1_OTHER_WS.encode("latin-1")
# Two spaces, then any more: sre looks for the two-space prefix itself, where "  +" tried a match at every
# space of the text (a page's text: 15 against 18 us when Latin-1, 40 against 48 when wider).
_SPACE_RUN = re.compile("   *")


def collapse_ws(s: str) -> str:
    """Collapse every whitespace run (Unicode-aware, so NBSP too) to one space and strip."""
    if len(s) < 256:
        return " ".join(s.split())
    # The same result without a str object per word (a page's text has thousands; split is ~30 ns
    # each). Page text mostly has single spaces left after the separator.
    try:
        raw = s.encode("latin-1")  # an ASCII or Latin-1 str's own bytes, copied at memcpy speed
    except UnicodeEncodeError:
        raw = None
    if raw is not None:
        # StringZilla's SIMD searches: one pass for all the other whitespace instead of a memchr
        # per character, and the search for a double space at a fiftieth of the CPU of str's (which
        # steps through a text with a space every few characters one or two at a time).
        if stringzilla.find_first_of(raw, _LATIN1_OTHER_WS_BYTES) >= 0:
            for c in _LATIN1_OTHER_WS:
                s = s.replace(c, " ")
            raw = s.encode("latin-1")
        double = stringzilla.contains(raw, b"  ")
    else:
        # `c in s` is a memchr, and free for a character wider than any in s.
        for c in _OTHER_WS:
            if c in s:
                s = s.replace(c, " ")
        double = "  " in s
    if double:
        s = _SPACE_RUN.sub(" ", s)
    return s.strip(" ")


def _refresh_target(content: str) -> str | None:
    m = _REFRESH.match(content)
    target = m.group(1).strip() if m else ""
    if target[:1] in ("'", '"'):
        quote, target = target[0], target[1:]
        end = target.find(quote)
        target = target[:end] if end >= 0 else target
    return target.strip() or None


def _folder_path(raw: str) -> str | None:
    """raw without its fragment when it is a path relative to the page's folder, else None.

    Such a path resolves the same on every page of that folder, and the normalizer drops the fragment
    ('os.html#os.path.join' and 'os.html#os.walk' are one URL): the pair is what pages share.
    """
    if not ((c := raw[:1]).isalnum() or c in _PATH_FIRST):
        return None
    path, hash_, _ = raw.partition("#")
    # A colon may make a scheme ('http:x'); whitespace before '#' would be kept (not stripped) with it.
    if ":" in path or (hash_ and (path[-1] <= " " or path[-1].isspace())):
        return None
    return path


def _has_attribute(node: LexborNode, attrs: dict[str, str | None], name: str) -> bool:
    """Whether the CSS selector [name] matches: lexbor also matches a namespaced attribute
    by its local name (svg's xlink:href), which the attribute dict keys by its qualified name."""
    return name in attrs or (any(":" in key for key in attrs) and node.css_matches(f"[{name}]"))


def _base_url(node: LexborNode | None, url: str, resolve: Callable[[str | None, str], str | None]) -> str:
    """The URL relative links resolve against: the first <base href>'s, else the page's."""
    # Like the HTML Standard ignoring javascript:/data: bases, an unusable base is ignored.
    return (resolve(node.attributes.get("href"), url) if node is not None else None) or url


def _other_anchor(node: LexborNode, tag: str) -> str:
    """An outlink's anchor when it is not an <a>'s text: an image link's alt, an <area>'s.

    _outlinks reads an <a>'s text itself (nearly every anchor, without a call): an anchor is short, so split and
    join is collapse_ws, and text_lexbor() is text() (each descendant text node, in order) without the
    Python-side buffer object.
    """
    if tag == "a":
        img = node.css_first("img[alt]")  # image links: alt is the anchor
        return collapse_ws(img.attributes.get("alt") or "") if img is not None else ""
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
        link_rels: Iterable[str] | None = None,  # None: parse.link_rels's default
        normalizer: Normalizer = PLAIN,
    ) -> None:
        self._robot_names = robot_names(agent_name)
        # Every link, the page's own URL and <base href> go through it: a relative link resolves against
        # the page's normalized URL (/p//0.html's ../p/1.html is /p/1.html, as on /p/0.html).
        self._normalizer = normalizer
        self._follow_nofollow = follow_nofollow_links
        self._shared = SharedTargets()
        self._tags = frozenset(t.lower() for t in outlink_tags)
        self._link_rels = frozenset(r.lower() for r in (link_rels if link_rels is not None else _default_link_rels()))
        # <link> is always collected: rel=canonical is read from it even when it is no outlink.
        roles = dict(_ROLES)
        for tag_id, (tag, _) in _LINK_OF_ID.items():
            if tag in self._tags or tag == "link":
                roles[tag_id] = roles.get(tag_id, 0) | _LINK
        self._roles = roles
        # The walk's lookup: each element's list (_SLOTS). An inline outlink (<a>) goes to the outlinks alone,
        # and the text step unwraps those of self._inline_links there; the rare tags of two other roles
        # (<title>, <iframe>) go through several() in the walk (_SEVERAL).
        self._slots = {tag_id: _SLOTS.get(role, _SEVERAL) for tag_id, role in roles.items()}
        self._inline_links = frozenset(t for t, role in roles.items() if role == _LINK | _INLINE_ROLE)

    def parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        if not body:
            return ParseResult(status="success")
        try:
            return self._parse(body, url, content_type)
        except Exception as exc:  # one malformed page must never take down a parse worker
            return ParseResult(status="failed", reason=f"{type(exc).__name__}: {exc}")

    def _parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        utf8, charset, source = decode_utf8(body, content_type, html=True)  # lexbor reads UTF-8 bytes fastest
        tree = LexborHTMLParser(utf8)
        res = ParseResult(status="success", metadata={"charset": charset, "charset_source": source})
        links: list[LexborNode] = []
        heads: list[LexborNode] = []
        inline: list[LexborNode] = []
        invisible: list[LexborNode] = []
        roles = self._roles

        def several(node: LexborNode) -> None:
            role = roles[node.tag_id]
            if role & _LINK:
                links.append(node)
            if role & _HEAD:
                heads.append(node)
            if role & _INLINE_ROLE:
                inline.append(node)
            elif role & _INVISIBLE_ROLE:
                invisible.append(node)

        # One lookup and one append an element (~780 of them on a documentation page): testing a bitmask of
        # roles bit by bit took 193 us a page where this takes 167 (docs/benchmarks.md).
        add = (links.append, heads.append, inline.append, invisible.append, several)
        slots, unknown = self._slots, FIRST_UNKNOWN_ID
        root = tree.root
        for node in root.traverse() if root is not None else ():  # document order
            if (slot := slots.get(tag_id := node.tag_id)) is not None:
                add[slot](node)
            elif tag_id >= unknown:
                inline.append(node)
        base_node = title = None
        metas: list[LexborNode] = []
        for node in heads:
            tag_id = node.tag_id
            if tag_id == _TITLE_ID:
                title = title or node
            elif tag_id == _META_ID:
                if _has_attribute(node, node.attributes, "content"):
                    metas.append(node)
            elif base_node is None and _has_attribute(node, node.attributes, "href"):
                base_node = node
        base = _base_url(base_node, url, self._normalizer.resolve)
        self._read_meta(metas, res, base)
        if root is not None and (lang := collapse_ws(root.attributes.get("lang") or "")):
            res.metadata["lang"] = lang
        if title is not None:
            res.title = collapse_ws(title.text())
        res.outlinks = self._outlinks(links, res, base)
        # Text last: it mutates the tree. Elements outside the body change none of its text.
        if (body_node := tree.body) is not None:
            # Unwrapping first leaves the same text, and deleting in reverse document order deletes
            # a nested invisible element before the one around it, never after it was freed with it.
            # An empty inline element goes too: unwrap() alone keeps it, and it would split the text
            # around it (Sphinx's `(<span id=..></span><a>PEP 539</a>)`, Vim's `*<a name=..></a>tag*`).
            # Which order they are unwrapped in does not matter: each is gone after, its children in its place.
            for node in inline:
                node.unwrap(delete_empty=True)
            if inline_links := self._inline_links:
                for node in links:
                    if node.tag_id in inline_links:
                        node.unwrap(delete_empty=True)
            for node in reversed(invisible):
                node.decompose()
            tree.merge_text_nodes()
            # Stripping each text node and skipping blank ones (indentation) leaves the same words
            # with fewer whitespace runs for collapse_ws.
            res.text = collapse_ws(body_node.text(separator=" ", strip=True, skip_empty=True))
        return res

    def _read_meta(self, metas: list[LexborNode], res: ParseResult, base: str) -> None:
        robots = Robots()
        for node in metas:
            attrs = node.attributes
            content = attrs.get("content") or ""
            name = (attrs.get("name") or "").strip().lower()
            if name in self._robot_names:
                robots = robots | parse_directives(content)
            elif name in ("description", "keywords"):
                if name not in res.metadata and (value := collapse_ws(content)):
                    res.metadata[name] = value
            elif res.refresh is None and (attrs.get("http-equiv") or "").strip().lower() == "refresh":
                res.refresh = self._normalizer.resolve(_refresh_target(content), base)
        res.noindex, res.nofollow = robots

    def _outlinks(self, links: list[LexborNode], res: ParseResult, base: str) -> list[Outlink]:
        follow = not res.nofollow
        tags, link_rels, follow_nofollow = self._tags, self._link_rels, self._follow_nofollow
        resolved: dict[str, str | None] = {}  # this page's own hrefs ('?q', '#f', other schemes), each once
        normalizer = self._normalizer
        resolve = normalizer.resolve
        # The base's origin and folder, as the normalizer resolves against them; none for a file: base (WHATWG
        # quirks of its own: its links are resolved page by page) or one that does not normalize.
        parts = normalizer.base_parts(base)
        origin, directory = (parts[1], parts[2]) if parts is not None and parts[1] is not None else (None, None)
        root = origin + "/" if origin is not None else None
        # An absolute URL, or one starting with a slash (a path from the root, or `//host/...`), resolves
        # the same on every page with this base's origin; a path relative to the page's folder on every
        # page of that folder: each is kept in the table of what it depends on, across pages (linkcache.py).
        # Keyed by the origin ('http://h', no slash) and by the folder ('http://h/' for the root folder): the
        # root folder's relative hrefs must never be read as paths from the root of a deeper page.
        by_root = self._shared.table(origin) if origin is not None else {}
        by_folder = self._shared.table(directory) if directory is not None else {}
        added = 0
        found: dict[str, Outlink] = {}  # insertion order = document order, first anchor kept
        for node in links:
            tag, target_attr = _LINK_OF_ID[node.tag_id]  # an int lookup; .tag builds a str
            attrs = node.attributes
            rel = attrs.get("rel")
            rels = rel.lower().split() if rel else ()
            if tag == "link":
                if res.canonical is None and "canonical" in rels:
                    res.canonical = resolve(attrs.get("href"), base)
                if "link" not in tags or "stylesheet" in rels or link_rels.isdisjoint(rels):
                    continue
            if not follow or ("nofollow" in rels and not follow_nofollow):
                continue
            raw = attrs.get(target_attr)
            if raw is None:
                continue
            # A table holds only hrefs of its own kind (the tests below decide it): one lookup each, in the
            # order of how common they are on documentation pages, before any test of the href itself.
            if (target := by_folder.get(raw, _UNSEEN)) is _UNSEEN and (target := by_root.get(raw, _UNSEEN)) is _UNSEEN:
                if raw in resolved:
                    target = resolved[raw]
                elif root is None:
                    target = resolved[raw] = resolve(raw, base)
                # A fragment of the page itself ('#section', Sphinx's headerlinks: dozens a page) is the page:
                # the normalizer drops fragments. One resolve a page, not one per fragment.
                elif raw[:1] == "#" and len(raw) < 1024:
                    if (target := resolved.get("#", _UNSEEN)) is _UNSEEN:
                        target = resolved["#"] = resolve("#", base)
                    resolved[raw] = target
                # Most shared links are paths from the root: tested before the other kinds (the prefixes exclude
                # each other).
                elif raw[:1] in _SLASHES:
                    target = by_root[raw] = resolve(raw, root)
                    added += 1
                elif raw.startswith(_ABSOLUTE):
                    target = by_root[raw] = resolve(raw)
                    added += 1
                elif raw.startswith(_OTHER_SCHEMES):  # what normalize() would reject, without its regex and raise
                    target = resolved[raw] = None
                # Only a path that cannot be a scheme or start with whitespace (stripped, it could become any
                # other form of reference) is the folder's; the normalizer drops its fragment.
                elif directory is not None and (path := _folder_path(raw)) is not None:
                    # Kept under the href without its fragment too: the page's other anchors into that file
                    # ('os.html#os.walk', 'os.html#os.sep') are then one lookup more, not a normalize each.
                    if (target := by_folder.get(path, _UNSEEN)) is _UNSEEN:
                        target = by_folder[path] = resolve(path, directory)
                        added += 1
                    if raw is not path:
                        by_folder[raw] = target
                        added += 1
                else:
                    target = resolved[raw] = resolve(raw, base)
            if target is not None and target not in found:
                # An <a>'s anchor is its text, read here (see _other_anchor).
                anchor = " ".join(node.text_lexbor().split()) if tag == "a" else ""
                found[target] = Outlink(target, anchor or _other_anchor(node, tag))
        if added:
            self._shared.added(added)
        if follow and res.refresh is not None and res.refresh not in found:
            found[res.refresh] = Outlink(res.refresh, "")
        return list(found.values())


def create(cfg: CrawlerConfig) -> HtmlParser:
    return HtmlParser(
        agent_name=cfg.http.agent_name,
        follow_nofollow_links=cfg.parse.follow_nofollow_links,
        outlink_tags=cfg.parse.outlink_tags,
        link_rels=cfg.parse.link_rels,
        normalizer=Normalizer.from_config(cfg),
    )
