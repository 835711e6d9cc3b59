"""parse-check shows the dispatcher's view: sniffed type, X-Robots-Tag, sitemap fields (DESIGN 6 keys kept)."""

from __future__ import annotations

import gzip
import json

import pytest
from aiohttp import web

from tests.conftest import run_crawler

CONTRACT = {"title", "text", "outlinks", "robots", "canonical", "refresh", "content_type"}


async def _check(*args: str) -> dict:
    result = await run_crawler("parse-check", *args, "-D", "http.allow_private_networks=true")
    assert result.code == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) >= CONTRACT
    return out


async def test_gzip_sitemap_file_shows_outlink_fields(tmp_path):
    """A .xml.gz sitemap file lists its URLs as outlinks with lastmod and priority beside url and anchor."""
    path = tmp_path / "sitemap.xml.gz"
    path.write_bytes(
        gzip.compress(
            b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>/a</loc>'
            b"<lastmod>2026-11-29</lastmod><priority>0.5</priority></url></urlset>"
        )
    )
    out = await _check("--base", "http://example.com/sitemap.xml.gz", str(path))
    assert out["outlinks"] == [
        {"url": "http://example.com/a", "anchor": "", "lastmod": "2026-11-29", "priority": "0.5"}
    ]
    assert out["content_type"] == "application/xml"


async def test_binary_file_with_html_type_is_unparsed(tmp_path):
    """A PNG given as text/html shows content_type image/png, status unparsed and no text."""
    path = tmp_path / "x.html"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(200)))
    out = await _check("--base", "http://example.com/x.html", "--content-type", "text/html", str(path))
    assert (out["status"], out["content_type"], out["text"], out["outlinks"]) == (
        "unparsed",
        "image/png",
        "",
        [],
    )


async def test_fetched_page_obeys_x_robots_tag():
    """Fetching a URL, parse-check applies the response's X-Robots-Tag: nofollow empties the outlinks."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text="<title>T</title><a href='/a'>a</a>",
            content_type="text/plain",  # lies: the bytes are HTML
            headers={"X-Robots-Tag": "crawler: nofollow, noindex"},
        )

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        out = await _check(f"http://127.0.0.1:{runner.addresses[0][1]}/")
    finally:
        await runner.cleanup()
    assert out["title"] == "T" and out["content_type"] == "text/html"
    assert out["robots"] == {"noindex": True, "nofollow": True} and out["outlinks"] == []


def _page(hrefs: list[str]) -> bytes:
    return ("<html><body>" + "".join(f'<a href="{h}">{i}</a>' for i, h in enumerate(hrefs)) + "</body></html>").encode()


def _sitemap(count: int) -> bytes:
    return ('<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<url><loc>/s/{i}</loc></url>" for i in range(count)) + "</urlset>").encode()


LINKS = [f"/p/{i}" for i in range(150)]
# file, overrides -> outlinks_over_cap (the outlinks are listed in full whatever the cap)
OVER_CAP = [
    (_page(LINKS), [], 0),
    (_page(LINKS), ["db.max_outlinks=100"], 50),
    (_page(LINKS + LINKS), ["db.max_outlinks=100"], 50),
    (_page(LINKS), ["db.max_outlinks=0"], 0),
    (_page(LINKS[:100] + [f"/x/{i}" for i in range(50)]), ["db.max_outlinks=100", "urls.filters=['-/x/', '+.']"], 0),
    (_page(LINKS[:100] + [f"http://other.example/{i}" for i in range(50)]),
     ["db.max_outlinks=100", "db.ignore_external_links=true"], 0),
    (_page(LINKS[:100] + [f"http://other.example/{i}" for i in range(50)]), ["db.max_outlinks=100"], 50),
    (_sitemap(150), ["db.max_outlinks=100"], 0),
    (_sitemap(150), ["db.max_outlinks=100", "sitemap.max_urls=120"], 30),
]


@pytest.mark.parametrize(("body", "overrides", "over_cap"), OVER_CAP)
async def test_outlinks_over_cap_says_what_updatedb_would_cut(tmp_path, body, overrides, over_cap):
    """outlinks_over_cap counts what db.max_outlinks (sitemap.max_urls for a sitemap) would cut, after the urls.*
    filters and db.ignore_external_links, as updatedb does; the outlinks themselves stay uncut (DESIGN 6a)."""
    path = tmp_path / "file"
    path.write_bytes(body)
    out = await _check("--base", "http://example.com/index", str(path), *(a for o in overrides for a in ("-D", o)))
    assert out["outlinks_over_cap"] == over_cap
    assert len(out["outlinks"]) == 150
