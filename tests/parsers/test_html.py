from __future__ import annotations

from html import escape

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.parsers import html as html_module
from crawler.parsers.base import Outlink, Parser, ParseResult
from crawler.parsers.html import HtmlParser, collapse_ws
from crawler.urls.normalize import normalize

PAGE = "http://example.com/dir/sub/page.html"


def parse(markup: str | bytes, url: str = PAGE, content_type: str | None = "text/html", **kw) -> ParseResult:
    body = markup.encode("utf-8") if isinstance(markup, str) else markup
    return HtmlParser(**kw).parse(body, url, content_type)


def urls(res: ParseResult) -> list[str]:
    return [o.url for o in res.outlinks]


def n(url: str) -> str:
    """The normalized form of an absolute URL, whatever the normalizer's exact rules."""
    return normalize(url)


def test_lexbor_numbers_the_elements_it_knows_below_the_unknown_ones():
    """The walk tells an unknown element by its id: every known one is below FIRST_UNKNOWN_ID."""
    from selectolax.lexbor import LexborHTMLParser

    from crawler.parsers.html import FIRST_UNKNOWN_ID

    markup = "<body><p>a<x-a>b</x-a><gtkdoclink>c</gtkdoclink><search></search><svg><feGaussianBlur/></svg>"
    ids = {n.tag: n.tag_id for n in LexborHTMLParser(markup).root.traverse()}
    assert max(ids[t] for t in ("html", "body", "p", "search", "svg", "feGaussianBlur")) < FIRST_UNKNOWN_ID
    assert min(ids["x-a"], ids["gtkdoclink"]) >= FIRST_UNKNOWN_ID


def test_html_parser_satisfies_parser_protocol():
    """HtmlParser is usable wherever a Parser is expected."""
    parser: Parser = HtmlParser()
    assert isinstance(parser.parse(b"<p>x</p>", PAGE, None), ParseResult)


@pytest.mark.parametrize(
    ("markup", "title", "text"),
    [
        ("<title> My \n  Page </title><p>Hello   world</p>", "My Page", "Hello world"),
        ("<head><script>var a=1;</script><style>p{}</style></head><body>Shown</body>", "", "Shown"),
        ("<body>a<script>hidden()</script> b<style>.x{}</style> c</body>", "", "a b c"),
        ("<body><noscript>Enable JS</noscript><template><p>tpl</p></template>ok</body>", "", "ok"),
        ("<p>wor<b>ld</b>, <a href='/x'>link</a>.</p><p>next</p>", "", "world, link. next"),
        ("<ul><li>one</li><li>two</li></ul>x<br>y", "", "one two x y"),
        ("<p>non\u00a0breaking\t\ttabs\r\n</p>", "", "non breaking tabs"),
        ("<head><noscript><img src=p.gif></noscript><title>T</title></head><body>body</body>", "T", "body"),
        ("<title>Only title</title>", "Only title", ""),
        # What real generators put between two runs of one sentence splits no word: an empty element
        # (Sphinx, Vim's help), an obsolete inline one (DocBook's <acronym>), a comment (Texinfo, React).
        ("<p>(<span id='i'></span><a href='/p'><strong>PEP 539</strong></a>)</p>", "", "(PEP 539)"),
        ("<p>*<a name='tag'></a><b>tag</b>*</p>", "", "*tag*"),
        ("<p>Logging (<acronym>WAL</acronym>)</p>", "", "Logging (WAL)"),
        ("<p>(<code>M&nbsp;&gt;&nbsp;nd</code><!-- /@w -->) then</p>", "", "(M > nd) then"),
        ("<p>Hello<!-- -->, <!-- -->world</p><div>a</div><!-- x --><div>b</div>", "", "Hello, world a b"),
        # An element lexbor does not know is inline, as in a browser (gtk-doc, web components).
        ("<p>the <GTKDOCLINK HREF='x'>threads\ndocs</GTKDOCLINK>. <time-ago>2</time-ago>d</p>", "", "the threads docs. 2d"),
    ],
)
def test_title_and_visible_text(markup, title, text):
    """Title is collapsed; text is the visible body text without script/style/noscript/template/head."""
    res = parse(markup)
    assert res.status == "success"
    assert (res.title, res.text) == (title, text)


def test_metadata_description_keywords_lang_charset():
    """Meta description/keywords, html lang and the decoding charset land in metadata."""
    res = parse(
        '<html lang="fr-CA"><head><meta name="Description" content="  A  page ">'
        '<meta name="keywords" content="a, b"><meta name="description" content="second"></head></html>'
    )
    assert res.metadata == {
        "charset": "utf-8",
        "charset_source": "utf-8",
        "description": "A page",
        "keywords": "a, b",
        "lang": "fr-CA",
    }


@pytest.mark.parametrize(
    ("markup", "expected"),
    [
        ("<a href='/a'>  Click \n <b>here</b> </a>", [("http://example.com/a", "Click here")]),
        ("<a href='/a'><img src=logo.png alt=' Home '></a>", [("http://example.com/a", "Home")]),
        ("<map><area href='/m' alt='Region'></map>", [("http://example.com/m", "Region")]),
        ("<iframe src='/if'>fallback</iframe>", [("http://example.com/if", "")]),
        (
            "<frameset><frame src='/f1'><frame src='/f2'></frameset>",
            [("http://example.com/f1", ""), ("http://example.com/f2", "")],
        ),
        (
            "<link rel='next' href='/p2'><link rel='Alternate' hreflang=de href='/de'>",
            [("http://example.com/p2", ""), ("http://example.com/de", "")],
        ),
        (
            "<link rel=prev href='/p0'><link rel=stylesheet href='/s.css'><link rel=icon href='/i.ico'>",
            [("http://example.com/p0", "")],
        ),
        ("<link rel='alternate stylesheet' href='/alt.css'><a name='x'>no href</a><img src='/i.png'>", []),
    ],
)
def test_outlinks_and_anchors(markup, expected):
    """Outlinks come from a/area/frame/iframe/link[rel=alternate|next|prev], in document order, with anchors."""
    assert [(o.url, o.anchor) for o in parse(markup).outlinks] == [(n(u), a) for u, a in expected]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("../x.html", "http://example.com/dir/x.html"),
        ("../../x.html", "http://example.com/x.html"),
        ("../../../../x.html", "http://example.com/x.html"),
        ("./y.html", "http://example.com/dir/sub/y.html"),
        ("y.html", "http://example.com/dir/sub/y.html"),
        ("/root.html", "http://example.com/root.html"),
        ("//other.org/p", "http://other.org/p"),
        ("?q=1", "http://example.com/dir/sub/page.html?q=1"),
        ("  \n /spaced.html \t", "http://example.com/spaced.html"),
        ("https://Secure.Example.com:443/z", "https://secure.example.com/z"),
    ],
)
def test_relative_resolution(href, expected):
    """Hrefs are trimmed, resolved against the page URL and normalized."""
    assert urls(parse(f'<a href="{href}">x</a>')) == [n(expected)]


@pytest.mark.parametrize(
    ("base", "href", "expected"),
    [
        ("http://cdn.example.org/root/", "a.html", "http://cdn.example.org/root/a.html"),
        ("/other/", "a.html", "http://example.com/other/a.html"),
        ("../", "../a.html", "http://example.com/a.html"),
        ("javascript:void(0)", "a.html", "http://example.com/dir/sub/a.html"),
        ("", "a.html", "http://example.com/dir/sub/a.html"),
    ],
)
def test_base_href(base, href, expected):
    """<base href> (itself resolved against the page URL) is the base for links; non-http bases are ignored."""
    res = parse(f'<head><base href="{base}"></head><a href="{href}">x</a>')
    assert urls(res) == [n(expected)]


def test_base_href_applies_to_canonical_and_refresh():
    """Canonical and refresh targets resolve against <base href> too."""
    res = parse(
        '<base href="http://b.example.net/x/"><link rel=canonical href="c">'
        '<meta http-equiv=refresh content="0; url=r">'
    )
    assert (res.canonical, res.refresh) == (n("http://b.example.net/x/c"), n("http://b.example.net/x/r"))


def test_duplicates_keep_first_anchor():
    """A URL linked twice (even spelled differently) appears once, with its first anchor."""
    res = parse(
        "<a href='/a'>first</a><a href='/b'>bee</a><a href='http://EXAMPLE.com/a'>second</a>"
        "<a href='/a#frag'>third</a><a href='/a'>fourth</a>"
    )
    assert res.outlinks == [
        Outlink(n("http://example.com/a"), "first"),
        Outlink(n("http://example.com/b"), "bee"),
    ]


@pytest.mark.parametrize(
    "href",
    [
        "javascript:void(0)",
        "JavaScript:alert(1)",
        "mailto:a@example.com",
        "tel:+15551234",
        "data:text/html,hi",
    ],
)
def test_non_http_schemes_dropped(href):
    """Links the normalizer rejects (javascript:, mailto:, tel:, data:) are dropped silently."""
    res = parse(f'<a href="{href}">bad</a><a href="/ok">ok</a>')
    assert res.status == "success"
    assert urls(res) == [n("http://example.com/ok")]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("/x#section", "http://example.com/x"),
        ("#top", PAGE),
        ("other.html?a=1#frag", "http://example.com/dir/sub/other.html?a=1"),
    ],
)
def test_fragments_dropped(href, expected):
    """Fragments are removed from outlinks."""
    assert urls(parse(f'<a href="{href}">x</a>')) == [n(expected)]


@pytest.mark.parametrize(
    ("metas", "agent", "noindex", "nofollow"),
    [
        ('<meta name="robots" content="noindex">', "", True, False),
        ('<meta name="robots" content="nofollow">', "", False, True),
        ('<meta name="ROBOTS" content="NOINDEX, NOFOLLOW">', "", True, True),
        ('<meta name="robots" content="none">', "", True, True),
        ('<meta name="robots" content="all">', "", False, False),
        ('<meta name="robots" content="index,follow">', "", False, False),
        ('<meta name="mybot" content="nofollow">', "MyBot", False, True),
        ('<meta name="MyBot" content="none">', "mybot", True, True),
        ('<meta name="otherbot" content="none">', "mybot", False, False),
        ('<meta name="robots" content="noindex"><meta name="mybot" content="nofollow">', "mybot", True, True),
        ('<meta name="robots" content="nofollow"><meta name="robots" content="all">', "", False, True),
    ],
)
def test_meta_robots(metas, agent, noindex, nofollow):
    """meta robots and agent-specific meta set noindex/nofollow; nofollow empties the outlinks."""
    res = parse(f"<head>{metas}</head><body>text <a href='/a'>a</a></body>", agent_name=agent)
    assert (res.noindex, res.nofollow) == (noindex, nofollow)
    assert urls(res) == ([] if nofollow else [n("http://example.com/a")])
    assert res.text == "text a"


def test_meta_robots_outside_head_still_counts():
    """A robots meta that the HTML parser moves into <body> is still obeyed."""
    res = parse(
        "<head><noscript><img src=x></noscript><meta name=robots content=nofollow></head><a href=/a>a</a>"
    )
    assert res.nofollow and res.outlinks == []


@pytest.mark.parametrize(
    ("follow", "expected"),
    [
        (False, ["http://example.com/keep"]),
        (True, ["http://example.com/skip", "http://example.com/keep", "http://example.com/ugc"]),
    ],
)
def test_rel_nofollow_links(follow, expected):
    """rel=nofollow links are skipped unless follow_nofollow_links is set."""
    res = parse(
        "<a href='/skip' rel='NoFollow'>s</a><a href='/keep' rel='noopener'>k</a>"
        "<a href='/ugc' rel='ugc nofollow'>u</a>",
        follow_nofollow_links=follow,
    )
    assert urls(res) == [n(u) for u in expected]


@pytest.mark.parametrize(
    ("markup", "expected"),
    [
        ('<link rel="canonical" href="/canon#x">', "http://example.com/canon"),
        ('<link rel="Canonical" href="HTTP://Example.COM:80/c">', "http://example.com/c"),
        ('<link rel="canonical" href="javascript:x">', None),
        ('<link rel="alternate" href="/alt">', None),
        ("", None),
    ],
)
def test_canonical(markup, expected):
    """Canonical is the absolute normalized <link rel=canonical> target, or None."""
    res = parse(f"<head>{markup}</head>")
    assert res.canonical == (n(expected) if expected else None)


def test_canonical_is_not_an_outlink():
    """The canonical link is reported separately, not queued as an outlink."""
    assert parse('<link rel="canonical" href="/canon">').outlinks == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("5; url=/x", "http://example.com/x"),
        ("0;URL='/x?a=1'", "http://example.com/x?a=1"),
        ('3 , url = "next.html"', "http://example.com/dir/sub/next.html"),
        ("0; /bare", "http://example.com/bare"),
        ("1;url=http://other.org/y#f", "http://other.org/y"),
        ("10", None),
        ("0; url=javascript:alert(1)", None),
        ("", None),
    ],
)
def test_meta_refresh(content, expected):
    """A meta refresh target is parsed tolerantly, made absolute, and also added to the outlinks."""
    res = parse(f'<head><meta http-equiv="Refresh" content="{escape(content)}"></head><a href="/a">a</a>')
    assert res.refresh == (n(expected) if expected else None)
    assert urls(res) == [n("http://example.com/a")] + ([n(expected)] if expected else [])


def test_refresh_not_an_outlink_under_nofollow():
    """Under meta nofollow the refresh target is still reported but not added to the outlinks."""
    res = parse('<meta name=robots content=nofollow><meta http-equiv=refresh content="0; url=/x">')
    assert res.refresh == n("http://example.com/x") and res.outlinks == []


def test_refresh_target_already_linked_keeps_anchor():
    """A refresh target that is also a link keeps the link's anchor and position."""
    res = parse('<meta http-equiv=refresh content="0; url=/x"><a href="/x">go</a>')
    assert res.outlinks == [Outlink(n("http://example.com/x"), "go")]


CAFE = "<html><head>{meta}<title>café</title></head><body>Un café crème</body></html>"


@pytest.mark.parametrize(
    ("meta", "encoding", "content_type", "charset"),
    [
        ("", "iso-8859-1", "text/html; charset=ISO-8859-1", "cp1252"),
        ("", "windows-1252", 'text/html; charset="windows-1252"', "cp1252"),
        ('<meta charset="windows-1252">', "windows-1252", "text/html", "cp1252"),
        ("<meta charset=iso-8859-1>", "iso-8859-1", None, "cp1252"),
        (
            '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-15">',
            "iso-8859-15",
            None,
            "iso8859-15",
        ),
        ('<meta charset="utf-8">', "utf-8", "text/html; charset=latin1", "cp1252"),
        ('<meta charset="windows-1252">', "utf-8", "text/html; charset=utf-8", "utf-8"),
        ("", "utf-8", "text/html", "utf-8"),
        ('<meta charset="no-such-charset">', "utf-8", "text/html; charset=bogus", "utf-8"),
        ('<meta charset="rot13">', "utf-8", None, "utf-8"),
        ('<meta charset="utf-16">', "utf-8", None, "utf-8"),
    ],
)
def test_charset_detection(meta, encoding, content_type, charset):
    """Charset comes from the header, else a meta tag in the first 2 KB, else UTF-8; unknown names fall back."""
    body = CAFE.format(meta=meta).encode(encoding)
    res = parse(body, content_type=content_type)
    if charset == "cp1252" and encoding == "utf-8":
        assert res.title == "cafÃ©"  # the header wins over the meta tag, even when it is wrong
    else:
        assert (res.title, res.text) == ("café", "Un café crème")
    assert res.metadata["charset"] == charset


def test_iso_8859_1_label_decodes_windows_1252_quotes():
    """Pages labelled iso-8859-1 are decoded as windows-1252, as browsers do (curly quotes survive)."""
    res = parse(
        "<p>\u201cquoted\u201d café</p>".encode("cp1252"), content_type="text/html; charset=iso-8859-1"
    )
    assert res.text == "\u201cquoted\u201d café"


def test_meta_charset_after_2kb_is_ignored():
    """Only the first 2 KB are scanned for a meta charset."""
    body = ("<!--" + "x" * 2100 + "-->" + "<meta charset=utf-16><p>caf\u00e9</p>").encode("utf-8")
    res = parse(body, content_type=None)
    assert res.metadata["charset_source"] == "utf-8" and res.text == "café"


@pytest.mark.parametrize(
    ("body", "charset"),
    [
        (b"\xef\xbb\xbf<p>caf\xc3\xa9</p>", "utf-8"),
        (b"\xff\xfe" + "<p>café</p>".encode("utf-16-le"), "utf-16-le"),
        (b"\xfe\xff" + "<p>café</p>".encode("utf-16-be"), "utf-16-be"),
    ],
)
def test_bom_detection(body, charset):
    """A byte-order mark decides the encoding (it beats the header, as in the HTML Standard) and is stripped."""
    res = parse(body, content_type="text/html; charset=iso-8859-1")
    assert (res.text, res.metadata["charset"]) == ("café", charset)


def test_invalid_bytes_are_replaced():
    """Bytes invalid in the charset become U+FFFD; text is always encodable as UTF-8."""
    res = parse(b"<title>a\xff\xfeb</title><p>caf\xe9 \xc3</p>", content_type="text/html; charset=utf-8")
    assert res.title == "a\ufffd\ufffdb" and res.text == "caf\ufffd \ufffd"
    res.text.encode("utf-8")


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x01\x02\xff\xfe\xfd garbage \x80\x81",
        b"<html><head><title>Trunc",
        b"<html><body><a href='/a'>one</a><p>text <a href=\"/b",
        b"<a href='http://[::1'>bad ipv6</a><a href='http://exa mple.com/'>space</a><a href='http://%zz/'>x</a>",
        b"<!-- unclosed comment <a href=/x>",
        b"<" * 5000 + b">" * 5000,
        b"<div>" * 20000 + b"deep",
        b"<table><tr><td><table><td>x</table></p></b></i></html></body>",
        b"<svg><a xlink:href='/s'><text>svg</text></a></svg><math><mi>x</mi></math>",
        b'<meta http-equiv=refresh content="0; url=\'"><meta charset=\x00\xff>',
        b"\xef\xbb\xbf",
        b"   \n\t ",
    ],
)
def test_malformed_input_never_raises(body):
    """Garbage bytes, truncated or absurd markup parse to a ParseResult without raising."""
    res = parse(body, content_type=None)
    assert res.status == "success"
    for s in [res.title, res.text, *(o.url + o.anchor for o in res.outlinks)]:
        s.encode("utf-8")


def test_empty_body_is_success_with_empty_fields():
    """An empty body parses successfully to empty fields."""
    assert parse(b"") == ParseResult(status="success")


def test_unexpected_error_becomes_failed_result(monkeypatch):
    """An unexpected exception inside the parser is returned as status=failed with a reason."""

    def boom(*args, **kwargs):
        raise RuntimeError("lexbor exploded")

    monkeypatch.setattr(html_module, "LexborHTMLParser", boom)
    res = parse("<p>x</p>")
    assert res.status == "failed" and "lexbor exploded" in (res.reason or "")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", ""), ("  a  b\n\tc ", "a b c"), ("x\u00a0\u2003y", "x y"), ("\n\n", "")],
)
def test_collapse_ws(raw, expected):
    """collapse_ws turns every whitespace run into one space and strips the ends."""
    assert collapse_ws(raw) == expected


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=4096), content_type=st.none() | st.text(max_size=60))
def test_arbitrary_bytes_never_raise(body, content_type):
    """Any bytes with any content type parse to a ParseResult without raising."""
    res = HtmlParser(agent_name="bot").parse(body, PAGE, content_type)
    assert isinstance(res, ParseResult) and res.status in ("success", "failed")
    res.text.encode("utf-8")


_TAGS = st.sampled_from(
    [
        "<a href='",
        "<a href=",
        "'>",
        "</a>",
        "<base href=",
        "<meta http-equiv=refresh content='0;url=",
        "<meta name=robots content=",
        "<link rel=canonical href=",
        "<script>",
        "</script>",
        "<p>",
        "<!--",
        "-->",
        "<title>",
        "javascript:",
        "../",
        "#",
        "//",
        "http://",
        "?",
        " ",
        "é",
        "\x00",
        "<",
        ">",
        '"',
    ]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_TAGS | st.text(max_size=8), max_size=40))
def test_arbitrary_markup_yields_normalized_links(parts):
    """Markup soup never raises and every outlink is absolute and already normalized."""
    res = parse("".join(parts))
    assert res.status == "success"
    for link in res.outlinks:
        assert link.url == normalize(link.url) and "#" not in link.url


# (name, markup, title, text fragments, exact outlinks, noindex); the page is PAGE.
DOCUMENTS = [
    (
        "base href",
        "<html><head><base href='http://cdn.example.org/r/'><title>Base</title></head>"
        "<body><a href='x.html'>x</a> <a href='/abs'>abs</a> <a href='../up'>up</a></body></html>",
        "Base",
        ["x abs up"],
        {"http://cdn.example.org/r/x.html", "http://cdn.example.org/abs", "http://cdn.example.org/up"},
        False,
    ),
    (
        "relative paths",
        "<title>Rel</title><a href='sib.html'>s</a> <a href='./dot/'>d</a> <a href='../../top'>t</a> "
        "<a href='?page=2'>q</a> <a href=''>self</a>",
        "Rel",
        ["s d t q self"],
        {
            "http://example.com/dir/sub/sib.html",
            "http://example.com/dir/sub/dot/",
            "http://example.com/top",
            "http://example.com/dir/sub/page.html?page=2",
            PAGE,
        },
        False,
    ),
    (
        "entities",
        "<title>Fish &amp; Chips &eacute;t&#233; &#x263A;</title>"
        "<p>5 &lt; 6 &gt; 4 &nbsp;&quot;q&quot; &copy;</p><a href='/s?a=1&amp;b=2&#38;c=3'>A &amp; B</a>",
        "Fish & Chips été ☺",
        ['5 < 6 > 4 "q" ©', "A & B"],
        {"http://example.com/s?a=1&b=2&c=3"},
        False,
    ),
    (
        "whitespace",
        "<title>\n\t  Spread \n  out  </title><p>  lots\n\n of\t\tspace  </p><a href=' \n/trim \t'>  a  b  </a>",
        "Spread out",
        ["lots of space a b"],
        {"http://example.com/trim"},
        False,
    ),
    (
        "uppercase tags",
        "<HTML><HEAD><TITLE>Shout</TITLE><META NAME=ROBOTS CONTENT=NOINDEX></HEAD>"
        "<BODY><P>Loud</P><A HREF='/UP'>Up</A><AREA HREF='/area' ALT='Ar'></BODY></HTML>",
        "Shout",
        ["Loud Up"],
        {"http://example.com/UP", "http://example.com/area"},
        True,
    ),
    (
        "unclosed tags",
        "<title>Open<p>para one<p>para two <a href='/u1'>one<a href='/u2'>two<div><b>bold<li>item",
        "Open<p>para one<p>para two <a href='/u1'>one<a href='/u2'>two<div><b>bold<li>item",
        [],
        set(),
        False,
    ),
    (
        "unclosed tags in body",
        "<title>Open</title><p>para one<p>para two <a href='/u1'>one<a href='/u2'>two<div><b>bold<li>item",
        "Open",
        ["para one", "para two onetwo", "bold", "item"],  # adjacent inline text joins, as a browser shows it
        {"http://example.com/u1", "http://example.com/u2"},
        False,
    ),
    (
        "script bodies",
        "<title>Scripts</title><script>document.write('<a href=\"/from-script\">x</a>')</script>"
        "<script type='text/template'><a href='/template'>t</a></script>"
        "<noscript><a href='/noscript'>ns</a></noscript><style>a[href='/css']{}</style>"
        "<template><a href='/tpl'>tpl</a></template><a href='/real'>real</a>",
        "Scripts",
        ["real"],
        {"http://example.com/real", "http://example.com/noscript"},
        False,
    ),
    (
        "rel nofollow",
        "<title>NF</title><a href='/keep'>keep</a> <a rel='nofollow' href='/drop'>drop</a> "
        "<a rel='sponsored NOFOLLOW' href='/drop2'>drop2</a>",
        "NF",
        ["keep drop drop2"],
        {"http://example.com/keep"},
        False,
    ),
    (
        "meta nofollow",
        "<head><title>MNF</title><meta name='robots' content='nofollow'></head><a href='/x'>x</a>",
        "MNF",
        ["x"],
        set(),
        False,
    ),
    (
        "meta noindex",
        "<head><title>NI</title><meta name='robots' content='noindex,follow'></head><a href='/x'>x</a>",
        "NI",
        ["x"],
        {"http://example.com/x"},
        True,
    ),
]


@pytest.mark.parametrize(
    ("markup", "title", "fragments", "outlinks", "noindex"),
    [d[1:] for d in DOCUMENTS],
    ids=[d[0] for d in DOCUMENTS],
)
def test_document_table(markup, title, fragments, outlinks, noindex):
    """Small documents: expected title, text fragments and the exact set of outlinks the crawler would queue."""
    res = parse(markup)
    assert res.status == "success"
    assert res.title == title
    for fragment in fragments:
        assert fragment in res.text
    assert set(urls(res)) == {n(u) for u in outlinks}
    assert "from-script" not in res.text + " ".join(urls(res))
    assert res.noindex is noindex


@pytest.mark.parametrize(
    ("tags", "rels", "expected"),
    [
        (["a"], ["alternate", "next", "prev"], ["/a"]),
        (["a", "iframe"], [], ["/a", "/if"]),
        (["a", "area", "frame", "iframe", "link"], ["next"], ["/next", "/a", "/if"]),
        (["link"], ["alternate", "prev"], ["/alt"]),
    ],
)
def test_outlink_elements_and_link_rels_are_configurable(tags, rels, expected):
    """parse.outlink_tags and parse.link_rels choose which elements and <link rel> values give outlinks."""
    res = parse(
        "<link rel=canonical href=/canon><link rel=next href=/next><link rel=alternate href=/alt>"
        "<a href=/a>a</a><iframe src=/if></iframe>",
        outlink_tags=tags,
        link_rels=rels,
    )
    assert urls(res) == [n("http://example.com" + p) for p in expected]
    assert res.canonical == n("http://example.com/canon")  # read whatever the outlink choices


@pytest.mark.parametrize("tags", [["a"], ["link"], ["a", "iframe"]])
def test_text_is_the_same_whichever_elements_give_outlinks(tags):
    """An <a> is unwrapped for the text whether or not it gives outlinks (the walk files it under one or the
    other), and an <iframe>'s fallback is never text."""
    res = parse("<p>wor<a href=/x>ld</a>(<a href=/y></a>x)<iframe src=/if>fallback</iframe> <b>end</b></p>",
                outlink_tags=tags)
    assert res.text == "world(x) end"


def test_navigational_link_rels_are_followed_by_default():
    """A Sphinx head: rel=index, search, next, prev and up are outlinks by default; stylesheet and icon are not."""
    res = parse(
        '<link rel="stylesheet" href="/s.css"><link rel="icon" href="/f.ico">'
        '<link rel="index" title="Index" href="/genindex.html"><link rel="search" href="/search.html">'
        '<link rel="next" href="/b.html"><link rel="prev" href="/a.html"><link rel="up" href="/toc.html">'
    )
    assert sorted(urls(res)) == sorted(n("http://example.com" + p) for p in
                                       ("/genindex.html", "/search.html", "/b.html", "/a.html", "/toc.html"))
