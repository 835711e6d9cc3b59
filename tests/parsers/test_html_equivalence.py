"""The HTML parser gives, field for field, what the reference implementation before its speed-ups gave."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.parsers.html import HtmlParser
from tests.parsers import html_reference

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["http://a.example/d/p.html", "https://b.example:8443/", "http://127.0.1.7:18080/p/3.html"]

_TAG = st.sampled_from(
    [
        "p",
        "div",
        "b",
        "i",
        "span",
        "em",
        "li",
        "br",
        "td",
        "h1",
        "pre",
        "nav",
        "main",
        "svg",
        "math",
        "foreignObject",
        "script",
        "style",
        "noscript",
        "template",
        "iframe",
        "title",
        "noembed",
        "frameset",
        "frame",
        "img",
        "head",
        "body",
    ]
)
_HREF = st.sampled_from(
    [
        "/p/1.html",
        "/p/1.html",
        "rel.html",
        "../up",
        "?q=1",
        "#frag",
        "",
        " /sp ",
        "//cdn.example/x",
        "\\back",
        "http://Other.example/y",
        "https://b.example:8443/z",
        "javascript:void(0)",
        "mailto:a@b",
        "data:x",
        "tel:1",
        "http://[bad",
        "http://a.example:99999/",
        "é/ü",
        "%41%zz",
        "http:rel",
        "ftp://x/",
    ]
)
_REL = st.sampled_from(
    [
        None,
        "nofollow",
        "NoFollow noopener",
        "canonical",
        "stylesheet",
        "alternate",
        "next",
        "prev alternate",
        "alternate stylesheet",
        "icon",
    ]
)
_TEXT = st.sampled_from(
    [
        "word",
        "wor",
        "ld",
        " ",
        "  ",
        "\n   ",
        "\t",
        "\u00a0",
        "&nbsp;",
        "\u3000",
        "\u2003",
        "é",
        "€",
        "\U0001f600",
        "&amp;",
        "&lt;b&gt;",
        "a  b",
        "x" * 40,
        "long text with  double  spaces " * 12,
        "<svg><![CDATA[c  d]]></svg>",
    ]
)

# A document's start decides what parses at all: <frame> only in a <frameset>, <base> and <meta> in a <head> too.
_START = st.sampled_from(
    ["", "<html lang=' en '><head><title> T  t </title>", "<frameset>", "<head><frameset>"]
)


def _attrs(draw) -> str:
    out = ""
    if (rel := draw(_REL)) is not None:
        out += f" rel='{rel}'"
    if draw(st.booleans()):
        out += f" alt='{draw(_TEXT)}'"
    return out


@st.composite
def _piece(draw) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return f"<a href='{draw(_HREF)}'{_attrs(draw)}>"
    if kind == 1:
        return f"<{draw(st.sampled_from(['area', 'link', 'base']))} href='{draw(_HREF)}'{_attrs(draw)}>"
    if kind == 2:
        return f"<{draw(st.sampled_from(['frame', 'iframe']))} src='{draw(_HREF)}'>"
    if kind == 3:
        name = draw(st.sampled_from(["robots", "ROBOTS", "description", "keywords", "other", None]))
        content = draw(
            st.sampled_from(
                [
                    "noindex",
                    "nofollow",
                    "none",
                    "index, follow",
                    " Some  words ",
                    "0; url=/r",
                    "5;URL='http://r.example/x'",
                    "",
                    "all",
                ]
            )
        )
        attr = f" name='{name}'" if name else " http-equiv='refresh'"
        return f"<meta{attr} content='{content}'>"
    if kind == 4:
        return f"<img alt='{draw(_TEXT)}'>"
    if kind == 5:
        return "</a>"
    if kind == 6:
        return f"</{draw(_TAG)}>"
    if kind == 7:
        return f"<{draw(_TAG)}>"
    return draw(_TEXT)


def _same(markup: bytes, url: str, content_type: str | None = "text/html") -> None:
    assert HtmlParser().parse(markup, url, content_type) == html_reference.HtmlParser().parse(
        markup, url, content_type
    )


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(_piece(), max_size=80), start=_START, url=st.sampled_from(PAGES))
def test_parse_result_equals_reference_on_markup_soup(pieces, start, url):
    """Title, text, outlinks with anchors, robots, canonical, refresh and metadata equal the reference's."""
    markup = start + "".join(pieces)
    _same(markup.encode("utf-8"), url)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=400), url=st.sampled_from(PAGES))
def test_parse_result_equals_reference_on_any_text(text, url):
    """Arbitrary characters, as body text or as a whole document, parse as the reference parses them."""
    _same(f"<p>{text}</p><a href='/x'>{text}</a>".encode("utf-8", "surrogatepass"), url)
    _same(text.encode("utf-8", "surrogatepass"), url, None)


def test_parse_result_equals_reference_on_bench_web_pages(tmp_path):
    """Every page of a small bench web (bench/sitegen.py, as the benchmark crawls it) parses as the reference."""
    spec = importlib.util.spec_from_file_location("sitegen", ROOT / "bench" / "sitegen.py")
    sitegen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sitegen)
    sitegen.generate(tmp_path, hosts=3, pages=12, port=18080, seed=random.Random(3).randrange(1000))
    pages = sorted(tmp_path.rglob("*.html"))
    assert len(pages) == 3 * (1 + 12 + 5)
    for path in pages:
        host, *rest = path.relative_to(tmp_path).parts
        _same(path.read_bytes(), f"http://{host}:18080/{'/'.join(rest)}")
