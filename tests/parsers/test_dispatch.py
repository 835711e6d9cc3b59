"""Dispatch: the parse.plugins table, sniffing when the header lies, gzip bodies, X-Robots-Tag."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.config import CrawlerConfig, load_config
from crawler.errors import ConfigError
from crawler.parsers import sniff as sniff_module
from crawler.parsers.directives import Robots, x_robots_tag
from crawler.parsers.dispatch import ParserDispatch, gunzip
from crawler.parsers.sniff import effective_type, sniff

ROOT = Path(__file__).resolve().parents[2]
URL = "http://example.com/dir/page"
HTML = b"<!DOCTYPE html><html><head><title>T</title></head><body><p>Hello</p><a href='/a'>A</a></body></html>"
RSS = b'<?xml version="1.0"?><rss version="2.0"><channel><title>F</title><item><title>I</title><link>/i</link></item></channel></rss>'
SITEMAP = b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://example.com/s</loc></url></urlset>'
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def dispatch(*overrides: str) -> ParserDispatch:
    cfg = CrawlerConfig()
    return ParserDispatch(cfg if not overrides else load_config(ROOT / "config.yaml", list(overrides)))


DEFAULT = dispatch()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (HTML, "text/html"),
        (b"\n\n  <html lang=en>", "text/html"),
        (b"<!-- generated --><p>x", "text/html"),
        (b"\xef\xbb\xbf<TITLE>x</TITLE>", "text/html"),
        (b"\xff\xfe" + "<html>x".encode("utf-16-le"), "text/html"),
        (RSS, "application/rss+xml"),
        (
            b'<?xml version="1.0"?><!-- c --><feed xmlns="http://www.w3.org/2005/Atom">',
            "application/atom+xml",
        ),
        (b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">', "application/rdf+xml"),
        (SITEMAP, "application/xml"),
        (b"<sitemapindex>", "application/xml"),
        (b'<?xml version="1.0"?><svg/>', "application/xml"),
        (b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml">', "text/html"),
        (PNG, "image/png"),
        (b"GIF89a" + bytes(20), "image/gif"),
        (b"%PDF-1.7\n", "application/pdf"),
        (gzip.compress(b"x"), "application/gzip"),
        (b"PK\x03\x04" + bytes(20), "application/zip"),
        (bytes(range(32)) * 8, "application/octet-stream"),
        (b"just some words", "text/plain"),
        (b"BMW and MZ are words, not images", "text/plain"),
        (b"a stray \x00 NUL in a long enough text is still text", "text/plain"),
        (b"", "text/plain"),
    ],
)
def test_sniff(body, expected):
    """The first bytes name the type: binary signatures, HTML tags, XML roots, else text or binary."""
    assert sniff(body) == expected


@pytest.mark.parametrize(
    ("declared", "body", "expected"),
    [
        ("text/html", HTML, "text/html"),
        ("", HTML, "text/html"),
        ("application/octet-stream", RSS, "application/rss+xml"),
        ("text/plain", HTML, "text/html"),
        ("text/plain", b"hello", "text/plain"),
        ("text/html", PNG, "image/png"),
        ("text/html", bytes(range(32)) * 8, "application/octet-stream"),
        ("text/html", RSS, "application/rss+xml"),
        ("text/html", b"hello, no tags", "text/html"),
        ("application/xml", RSS, "application/xml"),
        ("text/xml", gzip.compress(SITEMAP), "application/gzip"),
        ("image/png", HTML, "image/png"),
        ("application/pdf", HTML, "application/pdf"),
    ],
)
def test_effective_type(declared, body, expected):
    """The header is believed unless missing, generic, or contradicted by clear evidence in the bytes."""
    assert effective_type(declared, body) == expected


class TestTable:
    def test_defaults_cover_html_text_xml_and_feeds(self):
        """The built-in table sends each common type to its parser and everything else nowhere."""
        d = dispatch()
        assert d.parsers_for("text/html") == ["html"]
        assert d.parsers_for("text/plain") == ["text"]
        assert d.parsers_for("application/xml") == ["sitemap", "feed"]
        assert d.parsers_for("application/atom+xml") == ["feed"]
        assert d.parsers_for("image/png") == []

    def test_patterns_and_fallback(self):
        """An exact type beats a pattern, a longer pattern beats a shorter one, '*' takes the rest."""
        d = dispatch(
            "parse.plugins.text/*=[text]", "parse.plugins.application/*+xml=[feed]", "parse.plugins.*=[text]"
        )
        assert d.parsers_for("text/html") == ["html"]
        assert d.parsers_for("text/csv") == ["text"]
        assert d.parsers_for("application/foo+xml") == ["feed"]
        assert d.parsers_for("image/png") == ["text"]

    def test_listed_types_replace_only_their_entry(self):
        """Overriding one type keeps the other built-in entries; [] turns a type off."""
        cfg = load_config(ROOT / "config.yaml", ["parse.plugins.text/plain=[]"])
        assert cfg.parse.plugins["text/plain"] == [] and cfg.parse.plugins["text/html"] == ["html"]
        res = ParserDispatch(cfg).parse(b"hello", URL, "text/plain")
        assert res.status == "unparsed" and res.reason == "no parser for text/plain"

    def test_unknown_parser_name_is_a_config_error(self):
        """A misspelt parser name stops the command with the key and the known names."""
        with pytest.raises(
            ConfigError, match=r"parse\.plugins\.text/html: unknown parser 'htm' \(known: .*html"
        ):
            dispatch("parse.plugins.text/html=[htm]")

    def test_parsers_are_tried_in_order_until_one_succeeds(self):
        """The sitemap parser declines a feed served as application/xml, and the feed parser takes it."""
        res = dispatch().parse(RSS, URL, "application/xml")
        assert res.status == "success" and [o.url for o in res.outlinks] == ["http://example.com/i"]
        assert res.metadata["feed"] == "rss"

    def test_xml_nobody_recognises_is_unparsed(self):
        """XML that is neither a sitemap nor a feed is recorded as unparsed, with the last reason."""
        res = dispatch().parse(b'<?xml version="1.0"?><svg/>', URL, "application/xml")
        assert res.status == "unparsed" and "not a feed" in (res.reason or "")

    def test_dispatch_pickles(self):
        """A dispatch built from the config survives pickling (for a parse process pool)."""
        clone = pickle.loads(pickle.dumps(ParserDispatch(CrawlerConfig())))
        assert clone.parse(HTML, URL, "text/html").title == "T"


class TestWrongContentType:
    @pytest.mark.parametrize(
        "declared", ["text/plain", "application/octet-stream", None, "text/plain; charset=utf-8"]
    )
    def test_html_under_another_label_is_parsed_as_html(self, declared):
        """HTML served as text/plain, octet-stream or with no type gets title and links."""
        res = dispatch().parse(HTML, URL, declared)
        assert (res.status, res.title, [o.url for o in res.outlinks]) == (
            "success",
            "T",
            ["http://example.com/a"],
        )
        assert res.metadata["content_type"] == "text/html"

    @pytest.mark.parametrize("body", [PNG, bytes(range(32)) * 8, b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"])
    def test_binary_served_as_html_is_not_parsed_into_garbage(self, body):
        """Binary served as text/html is unparsed, with no text, naming both types."""
        res = dispatch().parse(body, URL, "text/html")
        assert res.status == "unparsed" and res.text == "" and res.outlinks == []
        assert "served as text/html" in (res.reason or "")
        assert res.metadata["declared_content_type"] == "text/html"

    def test_feed_served_as_html_is_read_as_a_feed(self):
        """An RSS document served as text/html yields its item links, not HTML soup."""
        res = dispatch().parse(RSS, URL, "text/html")
        assert res.metadata["content_type"] == "application/rss+xml" and res.title == "F"


class TestGzip:
    def test_gzip_sitemap_is_unpacked(self):
        """A .xml.gz sitemap (application/x-gzip or octet-stream) is unpacked and parsed."""
        for declared in ("application/x-gzip", "application/octet-stream", "text/xml"):
            res = dispatch().parse(gzip.compress(SITEMAP), URL + ".xml.gz", declared)
            assert [o.url for o in res.outlinks] == ["http://example.com/s"], declared
            assert res.metadata["gunzipped"] == "true"

    def test_corrupt_gzip_fails_with_a_reason(self):
        """A body with a gzip signature that does not inflate is failed, not garbage."""
        res = dispatch().parse(b"\x1f\x8b\x08\x00garbage", URL, "application/x-gzip")
        assert res.status == "failed" and res.reason == "corrupt gzip content"

    def test_gzip_bomb_stops_at_the_limit(self):
        """Unpacking never produces more than parse.gunzip_limit bytes, and says it truncated."""
        bomb = gzip.compress(b"<html><p>" + b"a" * 5_000_000)
        assert gunzip(bomb, 1000) == (b"<html><p>" + b"a" * 991, True)
        res = dispatch("parse.gunzip_limit=10kB").parse(bomb, URL, "application/gzip")
        assert res.metadata["gunzip_truncated"] == "true" and len(res.text) <= 10_000

    def test_gzip_inside_gzip_is_not_unpacked_twice(self):
        """Only one level of gzip is unpacked: a nested archive is unparsed."""
        res = dispatch().parse(gzip.compress(gzip.compress(HTML)), URL, "application/gzip")
        assert res.status == "unparsed"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["noindex"], Robots(True, False)),
        (["nofollow"], Robots(False, True)),
        (["none"], Robots(True, True)),
        (["NoIndex, NoFollow"], Robots(True, True)),
        (["all"], Robots(False, False)),
        (["mybot: nofollow"], Robots(False, True)),
        (["otherbot: noindex, nofollow"], Robots(False, False)),
        (["otherbot: noindex", "nofollow"], Robots(False, True)),
        (["otherbot: noindex, mybot: nofollow"], Robots(False, True)),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST"], Robots(False, False)),
        (["noindex", "unavailable_after: 25 Jun 2010, nofollow"], Robots(True, True)),
        ([], Robots(False, False)),
    ],
)
def test_x_robots_tag(values, expected):
    """X-Robots-Tag directives apply to all robots, or to the agent they name; they add up."""
    assert x_robots_tag(values, frozenset({"robots", "mybot"})) == expected


class TestXRobotsTag:
    def test_nofollow_header_drops_every_outlink(self):
        """X-Robots-Tag nofollow empties the outlinks of any type (here a sitemap) and is recorded."""
        res = dispatch().parse(SITEMAP, URL, "application/xml", headers={"X-Robots-Tag": "nofollow"})
        assert res.nofollow and not res.noindex and res.outlinks == []

    def test_headers_as_pairs_and_agent_name(self):
        """Headers may be (name, value) pairs, repeated; a directive for our agent name applies."""
        headers = [("x-robots-tag", "otherbot: nofollow"), ("X-Robots-Tag", "mybot: noindex")]
        res = dispatch("http.agent_name=MyBot").parse(HTML, URL, "text/html", headers=headers)
        assert res.noindex and not res.nofollow and len(res.outlinks) == 1

    def test_three_argument_call_still_works(self):
        """The fetcher's parse(body, url, content_type) call needs no headers."""
        assert dispatch().parse(HTML, URL, "text/html").status == "success"


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=2048)
    | st.sampled_from([HTML, RSS, SITEMAP, PNG]).map(lambda b: b[: len(b) // 2]),
    content_type=st.none()
    | st.sampled_from(
        ["text/html", "text/plain", "application/xml", "application/x-gzip", "image/png", "x/y"]
    )
    | st.text(max_size=40),
    robots=st.none() | st.text(max_size=40),
)
def test_arbitrary_input_never_raises(body, content_type, robots):
    """Any bytes, any Content-Type, any X-Robots-Tag: a ParseResult with UTF-8-safe strings, never an exception."""
    res = DEFAULT.parse(
        body, URL, content_type, headers={"X-Robots-Tag": robots} if robots is not None else None
    )
    assert res.status in ("success", "failed", "unparsed")
    for s in [res.title, res.text, *(o.url + o.anchor for o in res.outlinks), *res.metadata.values()]:
        s.encode("utf-8")


def _sniff_signature_reference(body: bytes) -> str | None:
    """The first of all binary signatures that matches, tried one by one."""
    head = body[:512]
    return next((mime for offset, sig, mime in sniff_module._MAGIC if head.startswith(sig, offset)), None)


_SIG_PIECES = st.sampled_from([sig for _, sig, _ in sniff_module._MAGIC] + [b"<", b"\x00", b"ftyp", b"WEBP", b"<html>"])


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_SIG_PIECES | st.binary(max_size=6), max_size=5))
def test_sniff_picks_the_first_matching_signature(pieces):
    """Signatures are checked by first byte, yet the one found is the first in the table that matches."""
    body = b"".join(pieces)
    expected = _sniff_signature_reference(body)
    if expected is not None:
        assert sniff(body) == expected
    else:
        assert sniff(body) not in {mime for _, _, mime in sniff_module._MAGIC}
