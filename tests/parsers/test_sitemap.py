"""Sitemaps and sitemap indexes: <loc> outlinks, per-outlink lastmod/priority, safety against hostile XML."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.config import CrawlerConfig
from crawler.parsers.dispatch import ParserDispatch
from crawler.parsers.sitemap import SitemapParser
from tests.conftest import run_crawler

URL = "http://example.com/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def parse(xml: str | bytes, url: str = URL):
    body = xml.encode("utf-8") if isinstance(xml, str) else xml
    return SitemapParser().parse(body, url, "application/xml")


def meta(res) -> dict:
    return json.loads(res.metadata.get("outlink_metadata", "{}"))


def test_urlset_entries_become_outlinks_with_their_fields():
    """Every <url><loc> is an outlink; lastmod, changefreq and a valid priority are kept per URL."""
    res = parse(
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>'
        "<url><loc> http://example.com/a </loc><lastmod>2026-11-01T10:00:00+00:00</lastmod>"
        "<changefreq>Daily</changefreq><priority>0.8</priority></url>"
        "<url><loc>/relative?x=1&amp;y=2</loc><priority>7</priority></url>"
        "<url><loc>http://example.com/a#dup</loc></url>"
        "<url><loc>mailto:someone@example.com</loc></url><url><lastmod>no loc</lastmod></url>"
        "</urlset>"
    )
    assert res.status == "success"
    assert [o.url for o in res.outlinks] == ["http://example.com/a", "http://example.com/relative?x=1&y=2"]
    assert meta(res) == {
        "http://example.com/a": {
            "lastmod": "2026-11-01T10:00:00+00:00",
            "changefreq": "daily",
            "priority": "0.8",
        }
    }
    assert (res.metadata["sitemap"], res.metadata["sitemap_entries"]) == ("urlset", "2")


def test_sitemap_index_lists_child_sitemaps():
    """A sitemap index's <sitemap><loc> children (gzip ones too) are the outlinks, with lastmod."""
    res = parse(
        f"<sitemapindex {NS}><sitemap><loc>http://example.com/s1.xml.gz</loc><lastmod>2026-10-01</lastmod>"
        "</sitemap><sitemap><loc>http://example.com/s2.xml</loc></sitemap></sitemapindex>"
    )
    assert [o.url for o in res.outlinks] == ["http://example.com/s1.xml.gz", "http://example.com/s2.xml"]
    assert meta(res) == {"http://example.com/s1.xml.gz": {"lastmod": "2026-10-01"}}
    assert res.metadata["sitemap"] == "sitemapindex"


def test_namespace_prefixes_and_missing_namespace():
    """Prefixed or namespace-less sitemaps read the same."""
    prefixed = parse(
        '<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<sm:url><sm:loc>http://example.com/p</sm:loc></sm:url></sm:urlset>"
    )
    bare = parse("<urlset><url><loc>http://example.com/p</loc></url></urlset>")
    assert [o.url for o in prefixed.outlinks] == [o.url for o in bare.outlinks] == ["http://example.com/p"]


def test_other_xml_is_declined():
    """XML that is not a sitemap is unparsed (so the next parser may try), not failed."""
    res = parse('<?xml version="1.0"?><rss version="2.0"/>')
    assert res.status == "unparsed" and "not a sitemap" in (res.reason or "")


def test_malformed_sitemap_is_recovered():
    """A truncated sitemap still yields the entries before the damage."""
    res = parse(f"<urlset {NS}><url><loc>http://example.com/ok</loc></url><url><loc>http://exa")
    assert res.status == "success" and [o.url for o in res.outlinks][:1] == ["http://example.com/ok"]


def test_entities_are_never_expanded():
    """A billion-laughs or external-entity sitemap is read without expanding entities or reading files."""
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(
            f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">'
            for i in range(1, 10)
        )
        + '<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        f"<urlset {NS}><url><loc>http://example.com/&lol9;</loc></url>"
        "<url><loc>http://example.com/&xxe;</loc></url></urlset>"
    )
    res = parse(bomb)
    assert all(len(o.url) < 100 and "root" not in o.url for o in res.outlinks)


def test_gzip_child_of_an_index_through_dispatch():
    """An index names a gzip child; the child's bytes (application/x-gzip) unpack and list their pages."""
    dispatch = ParserDispatch(CrawlerConfig())
    index = dispatch.parse(
        f"<sitemapindex {NS}><sitemap><loc>/child.xml.gz</loc></sitemap></sitemapindex>".encode(),
        "http://example.com/sitemap_index.xml",
        "application/xml",
    )
    [child] = index.outlinks
    body = gzip.compress(f"<urlset {NS}><url><loc>http://example.com/deep</loc></url></urlset>".encode())
    res = dispatch.parse(body, child.url, "application/x-gzip")
    assert [o.url for o in res.outlinks] == ["http://example.com/deep"] and res.metadata[
        "gunzipped"
    ] == "true"


async def test_crawl_follows_a_sitemap_index_into_a_gzip_child(tmp_path: Path, crawl_args):
    """Seeded with a sitemap index, the crawl fetches its gzip child sitemap and then the page it lists."""
    requests: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        requests.append(request.path)
        if request.path == "/sitemap_index.xml":
            body = f"<sitemapindex {NS}><sitemap><loc>/child.xml.gz</loc></sitemap></sitemapindex>".encode()
            return web.Response(body=body, content_type="application/xml")
        if request.path == "/child.xml.gz":
            body = gzip.compress(f"<urlset {NS}><url><loc>/listed.html</loc></url></urlset>".encode())
            return web.Response(body=body, content_type="application/x-gzip")
        if request.path == "/listed.html":
            return web.Response(text="<title>Listed</title>", content_type="text/html")
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"{base}/sitemap_index.xml\n")
        result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "3", *crawl_args)
        assert result.code == 0, result.stderr[-2000:]
    finally:
        await runner.cleanup()
    assert [p for p in requests if p != "/robots.txt"] == [
        "/sitemap_index.xml",
        "/child.xml.gz",
        "/listed.html",
    ]


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(
            [
                "<urlset>",
                "<sitemapindex>",
                "<url>",
                "<sitemap>",
                "<loc>",
                "</loc>",
                "<lastmod>",
                "<priority>",
                "&amp;",
                "&lol;",
                "http://",
                "/x",
                "</url>",
                "<!--",
                "]]>",
                "\x00",
            ]
        )
        | st.text(max_size=10),
        max_size=30,
    ),
    tail=st.binary(max_size=64),
)
def test_arbitrary_input_never_raises(parts, tail):
    """Any sitemap-like soup or bytes gives a result, never an exception; outlinks are absolute."""
    res = parse("".join(parts).encode("utf-8", "replace") + tail)
    assert res.status in ("success", "failed", "unparsed")
    assert all(o.url.startswith(("http://", "https://")) for o in res.outlinks)
