"""RSS and Atom feeds: item links as outlinks with their titles, feed text, dates per outlink."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.parsers.feed import FeedParser

URL = "http://example.com/blog/feed.xml"

RSS2 = """<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/">
<channel>
  <title>Example  Blog</title><link>http://example.com/blog/</link>
  <description>&lt;p&gt;Notes &amp;amp; news&lt;/p&gt;</description>
  <item><title>First post</title><link>http://example.com/blog/1</link>
    <pubDate>Sun, 29 Nov 2026 10:00:00 GMT</pubDate><description>&lt;b&gt;Bold&lt;/b&gt; summary</description></item>
  <item><title>Relative</title><link>2</link></item>
  <item><title>Guid only</title><guid>http://example.com/blog/3</guid></item>
  <item><title>Not a permalink</title><guid isPermaLink="false">tag:example.com,3</guid></item>
  <item><title>Duplicate</title><link>http://example.com/blog/1#again</link></item>
  <item><title>Script</title><link>javascript:alert(1)</link></item>
</channel></rss>"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://example.com/news/">
  <title type="text">Atom News</title><subtitle>All the news</subtitle>
  <link rel="self" href="http://example.com/news/atom.xml"/>
  <entry><title>One</title><link href="one.html"/><updated>2026-11-29T10:00:00Z</updated>
    <summary>First entry</summary></entry>
  <entry><title>Two</title><link rel="enclosure" href="two.mp3"/><link rel="alternate" href="/two"/></entry>
  <entry xml:base="http://other.example.org/x/"><title>Three</title><link href="three"/></entry>
</feed>"""

RDF = """<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
         xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="http://example.com/"><title>RDF Site</title><description>d</description></channel>
  <item rdf:about="http://example.com/r1"><title>R1</title><link>http://example.com/r1</link><dc:date>2026-11-01</dc:date></item>
  <item rdf:about="http://example.com/r2"><title>R2</title></item>
</rdf:RDF>"""


def parse(xml: str, url: str = URL):
    return FeedParser().parse(xml.encode("utf-8"), url, "application/xml")


def test_rss2_items():
    """RSS 2.0 item links (or permalink guids) are outlinks anchored by the item title; text is readable."""
    res = parse(RSS2)
    assert res.status == "success" and res.title == "Example Blog"
    assert [(o.url, o.anchor) for o in res.outlinks] == [
        ("http://example.com/blog/1", "First post"),
        ("http://example.com/blog/2", "Relative"),
        ("http://example.com/blog/3", "Guid only"),
    ]
    assert json.loads(res.metadata["outlink_metadata"]) == {
        "http://example.com/blog/1": {"lastmod": "Sun, 29 Nov 2026 10:00:00 GMT"}
    }
    assert res.metadata["description"] == "Notes & news" and res.metadata["feed"] == "rss"
    assert "Bold summary" in res.text and "<b>" not in res.text


def test_atom_entries():
    """Atom alternate links, resolved against xml:base, are outlinks; enclosures and self links are not."""
    res = parse(ATOM)
    assert res.title == "Atom News" and res.metadata["feed"] == "atom"
    assert [(o.url, o.anchor) for o in res.outlinks] == [
        ("http://example.com/news/one.html", "One"),
        ("http://example.com/two", "Two"),
        ("http://other.example.org/x/three", "Three"),
    ]
    assert json.loads(res.metadata["outlink_metadata"]) == {
        "http://example.com/news/one.html": {"lastmod": "2026-11-29T10:00:00Z"}
    }
    assert res.text == "Atom News All the news One First entry Two Three"


def test_rss1_rdf_items():
    """RSS 1.0 items beside the channel are read; rdf:about stands in for a missing link."""
    res = parse(RDF)
    assert [o.url for o in res.outlinks] == ["http://example.com/r1", "http://example.com/r2"]
    assert res.title == "RDF Site" and res.metadata["feed"] == "rdf"


@pytest.mark.parametrize("xml", ["<urlset/>", "<html><a href='/x'>x</a></html>", "", "not xml at all"])
def test_non_feeds_are_declined(xml):
    """Documents whose root is not rss, RDF or feed are unparsed, so another parser may try."""
    assert parse(xml).status == "unparsed"


def test_broken_feed_is_recovered():
    """A feed cut off mid-item still yields the items before the cut."""
    res = parse(RSS2[: RSS2.index("<item><title>Guid only")] + "<item><title>Cut")
    assert [o.url for o in res.outlinks] == ["http://example.com/blog/1", "http://example.com/blog/2"]


_FEED_TOKENS = st.sampled_from(
    [
        "<rss>",
        "<channel>",
        "<item>",
        "<title>",
        "</title>",
        "<link>",
        "</link>",
        "<guid>",
        "<feed>",
        "<entry>",
        "<link href='",
        "'/>",
        "<rdf:RDF>",
        "&lt;b&gt;",
        "&amp;",
        "http://",
        "/x",
        "<![CDATA[",
        "]]>",
        "\x00",
    ]
)


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(_FEED_TOKENS | st.text(max_size=10), max_size=30), tail=st.binary(max_size=64))
def test_feed_arbitrary_input_never_raises(parts, tail):
    """Any feed-like soup or bytes gives a result, never an exception; outlinks are absolute."""
    res = FeedParser().parse("".join(parts).encode("utf-8", "replace") + tail, URL, None)
    assert res.status in ("success", "failed", "unparsed")
    assert all(o.url.startswith(("http://", "https://")) for o in res.outlinks)
    res.text.encode("utf-8")
