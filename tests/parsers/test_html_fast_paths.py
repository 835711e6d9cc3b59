"""The HTML parser's fast paths give exactly what the plain computations they replace give."""

from __future__ import annotations

import sys
from html import escape

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from crawler.parsers import html as html_module
from crawler.parsers.html import HtmlParser, collapse_ws
from crawler.urls.normalize import InvalidUrl, Normalizer, normalize

ALL_WS = [c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()]
# Long enough for collapse_ws's scan path, with every whitespace character and wide ones around.
_PIECES = st.sampled_from([*ALL_WS, "  ", "\n    ", "a", "word", "é", "€", "\U0001f600", "x" * 300])


@pytest.mark.parametrize("ws", ALL_WS, ids=[f"U+{ord(c):04X}" for c in ALL_WS])
def test_collapse_ws_long_text_with_each_whitespace(ws):
    """Every character str.split() splits on becomes one space in a long text too."""
    raw = ws + ("word" + ws * 3) * 100 + "end" + ws
    assert collapse_ws(raw) == " ".join(raw.split())


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_PIECES, min_size=1, max_size=120))
def test_collapse_ws_matches_split_join(parts):
    """collapse_ws equals ' '.join(s.split()) on any text, short or long."""
    raw = "".join(parts)
    assert collapse_ws(raw) == " ".join(raw.split())


def _reference_text(markup: str) -> str:
    """The body text as computed before the fast path: every text node joined, then collapsed (comments
    and empty inline elements gone first, unknown elements inline, as they split no word)."""
    tree = LexborHTMLParser(markup.encode())
    if tree.body is None:
        return ""
    tree.strip_tags(html_module._INVISIBLE, recursive=True)
    for node in [n for n in tree.body.traverse() if n.tag_id == html_module._COMMENT_ID]:
        node.decompose()
    inline = html_module._INLINE_IDS
    for node in [n for n in tree.body.traverse() if n.tag_id in inline or n.tag_id >= html_module.FIRST_UNKNOWN_ID]:
        node.unwrap(delete_empty=True)
    tree.merge_text_nodes()
    return " ".join(tree.body.text(separator=" ").split())


_MARKUP = st.sampled_from(
    ["<p>", "</p>", "<div>", "</div>", "<b>", "</b>", "<span>", "</span>", "<br>", "<li>", "<script>x y</script>",
     "\n    ", "  ", "\t", "&nbsp;", "\u3000", "\u00a0", " ", "wor", "ld", "é", "<pre>", "</pre>", "<!-- c -->",
     "<x-y>", "</x-y>"]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_MARKUP | st.text(max_size=6), max_size=60), pad=st.integers(0, 40))
def test_text_matches_joined_text_nodes(parts, pad):
    """Page text equals the collapsed join of all visible text nodes, blank and indented ones included."""
    markup = "<html><body>" + "".join(parts) + ("<p>\n      filler words here\n    </p>" * pad) + "</body></html>"
    res = HtmlParser().parse(markup.encode(), "http://example.com/", "text/html")
    assert res.text == _reference_text(markup)


def _expected(hrefs: list[str], page: str, normalizer: Normalizer | None = None) -> list[str]:
    """The outlinks a page with these hrefs must have: each href normalized against the page, the first of
    each URL kept, the rejected ones left out."""
    found: list[str] = []
    for href in hrefs:
        try:
            url = normalizer.normalize(href, page) if normalizer is not None else normalize(href, page)
        except InvalidUrl:
            continue
        if url not in found:
            found.append(url)
    return found


def _links(hrefs: list[str], page: str) -> list[str]:
    markup = "".join(f"<a href='{escape(h, quote=True)}'>x</a>" for h in hrefs)
    return [o.url for o in HtmlParser().parse(markup.encode(), page, "text/html").outlinks]


def test_root_relative_links_resolve_against_each_pages_origin():
    """The same slash-led or absolute href on pages of different sites resolves for each site."""
    hrefs = ["/a", "//cdn.example.net/x", "\\b", "HTTP://Other.example/y", "http://other.example/y#f"]
    assert _links(hrefs, "http://a.example/dir/page") == [
        "http://a.example/a", "http://cdn.example.net/x", "http://a.example/b", "http://other.example/y"]
    assert _links(hrefs, "https://b.example:8443/p?q") == [
        "https://b.example:8443/a", "https://cdn.example.net/x", "https://b.example:8443/b", "http://other.example/y"]
    assert _links(hrefs, "http://user:pw@A.Example./z") == [
        "http://user:pw@a.example/a", "http://cdn.example.net/x", "http://user:pw@a.example/b", "http://other.example/y"]


_HREF = st.lists(
    st.sampled_from(["/", "\\", "//", "http://", "https://", "a", "é", "%41", "..", ":", "@", "?", "#", " ", "\t",
                     "[", "x.example", ":80", "/p", "javascript:", "mailto:", "data:", "tel:", "JavaScript:"]),
    max_size=8,
).map("".join)
_PAGES = st.sampled_from(["http://a.example/d/p", "https://b.example:8443/", "http://u@c.example./x?y",
                          "http://[::1]:81/z", "http://xn--bcher-kva.example/a/b/", "HTTP://Upper.Example/"])


@settings(max_examples=400, deadline=None)
@given(hrefs=st.lists(_HREF, max_size=6), page=_PAGES)
def test_outlinks_equal_normalize_of_each_href(hrefs, page):
    """Each outlink is normalize(href, page), whatever path (per page or cached across pages) resolved it."""
    assert _links(hrefs, page) == _expected(hrefs, page)


@pytest.mark.parametrize(
    "raw",
    ["word " * 100, "word " * 100 + " end", "\ud800  x " * 100, "\ud800 x " * 100, "é  " * 100, "\U0001f600 a " * 100],
    ids=["ascii", "ascii-double", "surrogate-double", "surrogate", "latin1-double", "astral"],
)
def test_collapse_ws_long_text_of_any_kind(raw):
    """A long text, ASCII or wider, even with a lone surrogate, collapses as split and join does."""
    assert collapse_ws(raw) == " ".join(raw.split())


_LATIN1_PIECES = st.sampled_from([c for c in ALL_WS if c <= "\xff"] + ["  ", "\n    ", "a", "é", "ÿ", "x" * 300])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_LATIN1_PIECES, min_size=1, max_size=120))
def test_collapse_ws_matches_split_join_on_latin1(parts):
    """On ASCII and Latin-1 text (the SIMD path) collapse_ws equals ' '.join(s.split()) too."""
    raw = "".join(parts)
    assert collapse_ws(raw) == " ".join(raw.split())


def test_folder_relative_links_resolve_against_each_pages_folder():
    """One parser, the same relative hrefs on pages of different folders, sites and queries: each page's
    own resolution, fragments dropped, a space before '#' kept as the normalizer keeps it."""
    normalizer = Normalizer(("http", "https", "file"))
    parser = HtmlParser(normalizer=normalizer)
    hrefs = ["os.html#os.walk", "os.html#os.path", "../index.html", "./a/b.html?x=1#y", "x.html #f", "é.html",
             "%41.html#z", "_s.html", "~u/", "-d.html"]
    markup = "".join(f"<a href='{escape(h, quote=True)}'>x</a>" for h in hrefs).encode()
    for page in ["http://a.example/lib/p.html", "http://a.example/lib/deep/q.html?s=1", "https://b.example/r",
                 "http://a.example/lib/p.html", "file:///srv/lib/p.html"]:
        assert [o.url for o in parser.parse(markup, page, "text/html").outlinks] == \
            _expected(hrefs, page, normalizer), page


# One parser for every example: its tables of hrefs carry over from page to page, as in a parse process.
_WITH_FILE = Normalizer(("http", "https", "file"))
_ONE_PARSER = HtmlParser(normalizer=_WITH_FILE)
_FOLDER_PAGES = st.sampled_from(["http://a.example/lib/p.html", "http://a.example/lib/q.html?s=1#t",
                                 "http://a.example/lib/deep/r.html", "http://a.example/", "https://a.example/lib/p.html",
                                 "http://b.example/lib/p.html", "http://a.example:81/lib/p.html",
                                 "file:///srv/lib/p.html", "http://a.example/lib/p.html/"])
_FOLDER_HREF = st.lists(
    st.sampled_from(["os.html", "#", "#x", "#y", "../", "./", "a/", "b.html", "?q", "/", "//c.example/", "http:",
                     "http://d.example/z", "%41", "é", " ", "_", "~", "-", ".", ":", "x"]),
    max_size=5,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(pages=st.lists(st.tuples(_FOLDER_PAGES, st.lists(_FOLDER_HREF, max_size=6)), min_size=1, max_size=4))
def test_outlinks_across_pages_equal_normalize_of_each_href(pages):
    """Pages of one parser, in any order, sharing hrefs within and across folders and origins: each page's
    outlinks are normalize(href, page), whatever table held the href since an earlier page."""
    for page, hrefs in pages:
        markup = "".join(f"<a href='{escape(h, quote=True)}'>x</a>" for h in hrefs).encode()
        assert [o.url for o in _ONE_PARSER.parse(markup, page, "text/html").outlinks] == \
            _expected(hrefs, page, _WITH_FILE), (page, hrefs)


@settings(max_examples=400, deadline=None)
@given(fragments=st.lists(st.text(max_size=12), max_size=6), page=_PAGES)
def test_fragment_links_are_the_page_itself(fragments, page):
    """An href that is only a fragment ('#x', any text after it) gives what normalize(href, page) gives: the
    page's own URL, resolved once a page. Long ones too: one past the length a URL may have is no link."""
    hrefs = [f"#{f}" for f in fragments] + ["#" + "x" * 2000, "#" + "y" * 9000]
    assert _links(hrefs, page) == _expected(hrefs, page)
