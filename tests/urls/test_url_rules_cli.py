"""The urls.* rules as a user meets them: normalize-check, a crawl's requests, file: seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawler.devserver import SiteServer
from tests.conftest import run_crawler

LINES = [
    ("http://h.example/p//0.html", "http://h.example/p/0.html"),
    ("http://h.example/a//b?next=//c", "http://h.example/a/b?next=//c"),
    ("http://h.example/a?utm_source=news&utm_medium=mail&id=7", "http://h.example/a?id=7"),
    ("http://h.example/a;jsessionid=0AF3?PHPSESSID=9&fbclid=1", "http://h.example/a"),
    ("http://h.example/a?sid=3", "http://h.example/a?sid=3"),
    ("file:///etc/passwd", "! unsupported scheme file"),
]


async def test_normalize_check_applies_the_url_rules():
    """normalize-check collapses slashes and drops tracking and session parameters, one line per input."""
    stdin = "".join(url + "\n" for url, _ in LINES).encode()
    result = await run_crawler("normalize-check", "-D", "log.format=json", stdin=stdin)
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines() == [out for _, out in LINES]


async def test_normalize_check_with_the_rules_off():
    """urls.collapse_slashes: false and urls.drop_params: [] leave such URLs as they are."""
    stdin = b"http://h.example/p//0.html?utm_source=x\n"
    result = await run_crawler("normalize-check", "-D", "urls.collapse_slashes=false", "-D", "urls.drop_params=[]",
                               stdin=stdin)
    assert result.stdout == "http://h.example/p//0.html?utm_source=x\n", result.stderr


async def test_normalize_check_base_is_normalized_first():
    """With --base, relative lines resolve against the base's normalized form."""
    result = await run_crawler("normalize-check", "--base", "http://h.example/p//0.html?gclid=1",
                               stdin=b"../p/1.html\n\n?utm_source=x\n")
    assert result.stdout.splitlines() == ["http://h.example/p/1.html", "http://h.example/p/0.html",
                                          "http://h.example/p/0.html"], result.stderr


async def test_normalize_check_file_urls_need_the_file_protocol(tmp_path):
    """file: URLs pass normalize-check once the file protocol is enabled and listed; the reason says what is missing."""
    stdin = b"file:///srv//docs/a.html#x\n"
    listed = await run_crawler("normalize-check", "-D", "urls.schemes=[http, https, file]", stdin=stdin)
    assert listed.stdout == "! unsupported scheme file (protocols.file.enabled is false)\n", listed.stderr
    enabled = await run_crawler("normalize-check", "-D", "urls.schemes=[http, https, file]",
                                "-D", "protocols.file.enabled=true", stdin=stdin)
    assert enabled.stdout == "file:///srv/docs/a.html\n", enabled.stderr


def _write_site(root: Path) -> None:
    """Pages that link their neighbours through '//' variants, tracking parameters and relative paths."""
    pages = {
        "index.html": ['/p//0.html', '/p/0.html?utm_source=home&utm_medium=web', 'p//1.html'],
        "p/0.html": ['../p/1.html', '..//p//2.html', '/p//1.html?sessionid=8F2A&fbclid=x'],
        "p/1.html": ['../p/0.html', './/2.html', '2.html;jsessionid=0A1B2C'],
        "p/2.html": ['../p/3.html?gclid=abc', './/3.html'],
        "p/3.html": ['/p//3.html', '../p/2.html?utm_content=x'],
    }
    for name, links in pages.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        anchors = "".join(f'<a href="{href}">link</a>' for href in links)
        path.write_text(f"<html><head><title>{name}</title></head><body>{anchors}</body></html>")


@pytest.mark.parametrize("rules", [True, False], ids=["shipped-rules", "rules-off"])
async def test_crawl_requests_each_page_once_in_one_spelling(tmp_path, crawl_args, rules):
    """With the shipped rules the server sees each page once, no '//' variant and no /p/p/ page that
    relative links on a variant would make; with the rules off, the same site costs those requests."""
    site = tmp_path / "site"
    _write_site(site)
    off = [] if rules else ["-D", "urls.collapse_slashes=false", "-D", "urls.drop_params=[]"]
    async with SiteServer(site, "127.0.0.1", 0) as server:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(server.url("/") + "\n")
        result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "6", *crawl_args, *off)
        assert result.code == 0, result.stderr[-2000:]
        paths = [p for p in server.paths() if p != "/robots.txt"]
    if rules:
        # Every page, each once, nothing else.
        assert sorted(paths) == ["/", "/p/0.html", "/p/1.html", "/p/2.html", "/p/3.html"]
    else:
        # What the issue counted on a realistic web: variants of fetched pages, and 404s made by their links.
        assert "/p//0.html" in paths and "/p/0.html?utm_source=home&utm_medium=web" in paths
        assert "/p/p/1.html" in paths


async def test_file_seed_is_injected_and_crawled(tmp_path, crawl_args):
    """With protocols.file.enabled and file in urls.schemes, a file: seed is injected, fetched and its links followed."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "index.html").write_text('<html><body><a href="a.html">a</a> <a href="sub//b.html">b</a></body></html>')
    (docs / "a.html").write_text("<html><head><title>A</title></head><body>page a</body></html>")
    (docs / "sub" / "b.html").write_text("<html><head><title>B</title></head><body>page b</body></html>")
    seed = (docs / "index.html").as_uri()
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(seed + "\n")
    files = ["-D", "protocols.file.enabled=true", "-D", "urls.schemes=[http, https, file]"]

    refused = await run_crawler("inject", str(seeds), *crawl_args, "-D", "urls.schemes=[http, https, file]")
    assert refused.code == 0, refused.stderr
    rejected = [e for e in refused.events() if e["event"] == "inject.rejected"]
    assert [e["reason"] for e in rejected] == ["unsupported scheme file (protocols.file.enabled is false)"]

    result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "3", *crawl_args, *files)
    assert result.code == 0, result.stderr[-2000:]
    dump = await run_crawler("readdb", "--dump", *crawl_args, *files)
    pages = {row["url"]: row["status"] for row in map(json.loads, dump.stdout.splitlines())}
    base = docs.as_uri()
    assert pages == {seed: "fetched", f"{base}/a.html": "fetched", f"{base}/sub/b.html": "fetched"}
