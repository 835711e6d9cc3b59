"""What the outlink caps keep and cut: db.max_outlinks for pages, sitemap.max_urls for sitemaps, robots.txt
Sitemap: URLs never; every cut counted in updatedb.done, meta.json and readdb --stats."""

from __future__ import annotations

import json
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from crawler.devserver import SiteServer
from crawler.jobs.readdb import db_stats
from crawler.jobs.updatedb import updatedb
from crawler.webdb.store import VersionedStore
from tests.conftest import run_crawler

from .conftest import NOW, fetch, make_cfg, page, parse, read_links, write_db

LOG = structlog.get_logger()
URL = "http://site.example/index"
SITEMAP = "http://site.example/sitemap.xml"


def links(prefix: str, count: int, anchor: str = "a") -> list[tuple[str, str]]:
    return [(f"http://site.example/{prefix}{i}", anchor) for i in range(count)]


def targets(prefix: str, count: int) -> list[str]:
    return [u for u, _ in links(prefix, count)]


def robots_row(page_links: list[tuple[str, str]], sitemaps: list[str], **metadata: str) -> dict[str, Any]:
    """A parse_data row as the fetcher writes it after appending robots.txt Sitemap: URLs (add_robots_sitemaps)."""
    row = parse(URL, page_links + [(u, "sitemap") for u in sitemaps])
    row["metadata"] = [*metadata.items(), *([("robots_sitemaps", str(len(sitemaps)))] if sitemaps else [])]
    return row


def over(outlinks: int = 0, sitemap_urls: int = 0, pages: int = 0) -> dict[str, int]:
    return {"outlinks": outlinks, "sitemap_urls": sitemap_urls, "pages": pages}


# id, config sections, parse_data row of URL -> outlink targets kept (in page order), counts of the cut
CASES = [
    ("page over the cap", {"db": {"max_outlinks": 100}}, parse(URL, links("p", 150)),
     targets("p", 100), over(50, pages=1)),
    ("page at the cap", {"db": {"max_outlinks": 100}}, parse(URL, links("p", 100)), targets("p", 100), over()),
    ("repeated links are not cut", {"db": {"max_outlinks": 100}}, parse(URL, links("p", 100) + links("p", 50)),
     targets("p", 100), over()),
    ("filtered links are not cut", {"db": {"max_outlinks": 100}, "urls": {"filters": ["-/x", "+."]}},
     parse(URL, links("p", 60) + links("x", 50) + links("p", 100)[60:]), targets("p", 100), over()),
    ("0 is no cap", {"db": {"max_outlinks": 0}}, parse(URL, links("p", 150)), targets("p", 150), over()),
    ("the default keeps 5000", {}, parse(URL, links("p", 5001)), targets("p", 5000), over(1, pages=1)),
    ("a sitemap has its own cap", {"db": {"max_outlinks": 100}},
     parse(URL, links("s", 150), metadata=[("sitemap", "urlset")]), targets("s", 150), over()),
    ("a sitemap over sitemap.max_urls", {"db": {"max_outlinks": 100}, "sitemap": {"max_urls": 120}},
     parse(URL, links("s", 150), metadata=[("sitemap", "urlset")]), targets("s", 120), over(sitemap_urls=30, pages=1)),
    ("a sitemap index too", {"db": {"max_outlinks": 100}, "sitemap": {"max_urls": 120}},
     parse(URL, links("s", 150), metadata=[("sitemap", "sitemapindex")]), targets("s", 120),
     over(sitemap_urls=30, pages=1)),
    ("a page is capped by db.max_outlinks, not sitemap.max_urls", {"db": {"max_outlinks": 100}, "sitemap": {"max_urls": 120}},
     parse(URL, links("p", 150), metadata=[("feed", "rss")]), targets("p", 100), over(50, pages=1)),
    ("a robots.txt sitemap after a full page", {"db": {"max_outlinks": 100}},
     robots_row(links("p", 150), [SITEMAP]), [*targets("p", 100), SITEMAP], over(50, pages=1)),
    ("a robots.txt sitemap the page links past the cap is kept once, not counted", {"db": {"max_outlinks": 100}},
     robots_row(links("p", 120) + [(SITEMAP, "map")] + links("p", 150)[120:], [SITEMAP]),
     [*targets("p", 100), SITEMAP], over(50, pages=1)),
    ("a robots.txt sitemap the page links within the cap keeps its place", {"db": {"max_outlinks": 100}},
     robots_row([(SITEMAP, "map"), *links("p", 150)], [SITEMAP, SITEMAP]), [SITEMAP, *targets("p", 99)],
     over(51, pages=1)),
    ("robots.txt sitemaps on a page without links", {"db": {"max_outlinks": 1}},
     robots_row([], [SITEMAP, "http://site.example/news.xml"]), [SITEMAP, "http://site.example/news.xml"], over()),
    ("robots.txt sitemaps still pass the filters", {"db": {"max_outlinks": 100, "ignore_external_links": True}},
     robots_row(links("p", 2), ["http://cdn.example/sitemap.xml", SITEMAP]), [*targets("p", 2), SITEMAP], over()),
    ("a link the page anchors 'sitemap' is an ordinary link", {"db": {"max_outlinks": 100}},
     parse(URL, links("p", 100) + [(SITEMAP, "sitemap")]), targets("p", 100), over(1, pages=1)),
    ("a sitemap's own robots.txt sitemap", {"sitemap": {"max_urls": 10}},
     robots_row(links("s", 20), [SITEMAP], sitemap="urlset"), [*targets("s", 10), SITEMAP],
     over(sitemap_urls=10, pages=1)),
]


@pytest.mark.parametrize(("sections", "row", "kept", "counts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_caps(tmp_path, make_segment, sections, row, kept, counts):
    """The outlinks queued and recorded, and the counts of those the caps cut."""
    cfg = make_cfg(tmp_path, **sections)
    write_db(cfg, [page(URL)])
    report = updatedb(cfg, [make_segment("20260101T010000000Z", [fetch(URL)], [row])], LOG, now=NOW)
    assert sorted(to for _, to, _ in read_links(cfg)) == sorted(kept)
    assert len(kept) == len(set(kept))
    assert report.over_cap == counts


def test_cut_is_logged_and_totalled_over_updates(tmp_path, make_segment):
    """updatedb.done counts this update's cut; meta.json and readdb --stats the total over merged segments."""
    cfg = make_cfg(tmp_path, db={"max_outlinks": 100}, sitemap={"max_urls": 10})
    other = "http://site.example/other"
    write_db(cfg, [page(URL), page(other)])
    first = make_segment("20260101T010000000Z", [fetch(URL), fetch(SITEMAP)],
                         [parse(URL, links("p", 130)), parse(SITEMAP, links("s", 15), metadata=[("sitemap", "urlset")])])
    with capture_logs() as logs:
        updatedb(cfg, [first], LOG, now=NOW)
    done = next(e for e in logs if e["event"] == "updatedb.done")
    assert (done["outlinks_over_cap"], done["sitemap_urls_over_cap"], done["pages_over_cap"]) == (30, 5, 2)
    assert db_stats(cfg)["over_cap"] == over(30, 5, 2)

    second = make_segment("20260101T020000000Z", [fetch(other)], [parse(other, links("q", 101))])
    updatedb(cfg, [second], LOG, now=NOW)
    assert db_stats(cfg)["over_cap"] == over(31, 5, 3)
    meta = VersionedStore(cfg.crawl_path / "webdb").require_current().meta
    assert meta["over_cap"] == over(31, 5, 3)


def test_a_version_from_before_the_count_reads_as_none_cut(cfg):
    """A webdb written before the count existed (no over_cap in meta.json) shows zeros, not an error."""
    write_db(cfg, [page(URL)])
    assert db_stats(cfg)["over_cap"] == over()


SITE_LINKS = 150  # on the index page, over a db.max_outlinks of 100
SITEMAP_URLS = 150  # in sitemap.xml, over a sitemap.max_urls of 120 (not the 100 of pages)


@pytest.fixture
async def capped_site(tmp_path):
    root = tmp_path / "site"
    (root / "p").mkdir(parents=True)
    (root / "s").mkdir()
    (root / "index.html").write_text(
        "<html><body>" + "".join(f'<a href="/p/{i}.html">{i}</a>' for i in range(SITE_LINKS)) + "</body></html>")
    async with SiteServer(root, "127.0.0.1", 0) as server:
        (root / "sitemap.xml").write_text(
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<url><loc>{server.base_url}/s/{i}.html</loc></url>" for i in range(SITEMAP_URLS))
            + "</urlset>")
        (root / "robots.txt").write_text(f"User-agent: *\nDisallow:\nSitemap: {server.base_url}/news-sitemap.xml\n")
        yield server


async def test_a_crawl_shows_every_cut(tmp_path, capped_site, crawl_args):
    """A real crawl round: the page keeps 100 links, the sitemap 120 URLs, the robots.txt sitemap is queued, and
    updatedb.done and readdb --stats (text and JSON) say what was cut."""
    base = capped_site.base_url
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{base}/index.html\n{base}/sitemap.xml\n")
    args = [*crawl_args, "-D", "db.max_outlinks=100", "-D", "sitemap.max_urls=120"]
    crawled = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "1", *args)
    assert crawled.code == 0, crawled.stderr
    done = next(e for e in crawled.events() if e["event"] == "updatedb.done")
    assert (done["outlinks_over_cap"], done["sitemap_urls_over_cap"], done["pages_over_cap"]) == (50, 30, 2)

    dump = await run_crawler("readdb", "--dump", *args)
    urls = {json.loads(line)["url"] for line in dump.stdout.splitlines()}
    assert {u for u in urls if "/p/" in u} == {f"{base}/p/{i}.html" for i in range(100)}
    assert {u for u in urls if "/s/" in u} == {f"{base}/s/{i}.html" for i in range(120)}
    assert f"{base}/news-sitemap.xml" in urls

    stats = await run_crawler("readdb", "--stats", "--json", *args)
    assert json.loads(stats.stdout)["over_cap"] == over(50, 30, 2)
    text = await run_crawler("readdb", "--stats", *args)
    assert "over cap       50 outlinks (db.max_outlinks), 30 sitemap URLs (sitemap.max_urls), on 2 pages" in text.stdout
