"""In-round following (fetcher.follow_depth): a site's link tree in one round, each page requested once.

The server's request log is the judge: which paths were requested, and how often.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from aiohttp import web

from crawler.devserver import SiteServer
from tests.conftest import run_crawler, serve_app


def _chain_site(root: Path, length: int = 6) -> Path:
    """/ links p0; each pN links p(N+1) (a rel=next chain, one level per page) and back to /; p2 links a
    disallowed page."""
    root.mkdir()
    (root / "index.html").write_text('<html><body><a href="p0.html">first</a></body></html>')
    for n in range(length):
        links = '<a href="index.html">home</a>'
        if n + 1 < length:
            links += f'<link rel="next" href="p{n + 1}.html">'
        if n == 2:
            links += '<a href="private/x.html">private</a>'
        (root / f"p{n}.html").write_text(f"<html><head>{links}</head><body><p>page {n}</p>{links}</body></html>")
    (root / "private").mkdir()
    (root / "private" / "x.html").write_text("<html><body>private</body></html>")
    (root / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    return root


def _events(stderr: str, name: str) -> list[dict]:
    out = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == name:
                out.append(event)
    return out


def _pages(paths: list[str]) -> Counter:
    return Counter(p for p in paths if p != "/robots.txt")


async def _one_round(seed_url: str, tmp_path: Path, crawl_args: list[str], *extra: str):
    """``crawl --rounds 1`` from ``seed_url`` (into crawl_args' crawl_dir); its result, checked to succeed."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(seed_url + "\n")
    result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "1", *crawl_args, *extra)
    assert result.code == 0, result.stderr
    return result


async def test_one_round_fetches_the_whole_chain_once_and_obeys_robots(tmp_path, crawl_args):
    async with SiteServer(_chain_site(tmp_path / "site"), "127.0.0.1", 0) as site:
        result = await _one_round(site.url("/"), tmp_path, crawl_args)
        after_one = _pages(site.paths())
        # Two more rounds: nothing fetched in the first is asked for again.
        again = await run_crawler("crawl", "--seeds", str(tmp_path / "seeds.txt"), "--rounds", "2", *crawl_args)
        assert again.code == 0, again.stderr
        after_three = _pages(site.paths())
    chain = {"/", "/index.html", *(f"/p{n}.html" for n in range(6))}
    assert set(after_one) == chain, after_one
    assert all(count == 1 for count in after_three.values()), after_three
    assert "/private/x.html" not in after_three
    done = _events(result.stderr, "fetch.done")
    assert len(done) == 1 and done[0]["followed"] == len(chain), done  # the chain but / and the private page
    denied = [row for part in sorted(tmp_path.glob("segments/*/fetcher/part-*.parquet"))
              for row in pq.read_table(part).to_pylist() if row["status"] == "robots_denied"]
    assert [row["url"] for row in denied] == [site.url("/private/x.html")]
    dump = await run_crawler("readdb", "--dump", "--format", "jsonl", *crawl_args)
    statuses = {json.loads(line)["url"]: json.loads(line)["status"] for line in dump.stdout.splitlines()}
    assert all(statuses[site.url(path)] == "fetched" for path in chain - {"/index.html"}), statuses


async def test_follow_depth_counts_link_hops_from_a_fetchlist_entry(tmp_path, crawl_args):
    async with SiteServer(_chain_site(tmp_path / "site"), "127.0.0.1", 0) as site:
        result = await _one_round(site.url("/"), tmp_path, crawl_args, "-D", "fetcher.follow_depth=2")
        # / -> p0.html (one hop) -> index.html, p1.html (two): p1's links wait for the next round.
        assert set(_pages(site.paths())) == {"/", "/p0.html", "/index.html", "/p1.html"}
        # The cut is counted: the two pages two hops out had their links left for the next round.
        done = _events(result.stderr, "fetch.done")
        assert done[0]["follow_skipped"].get("max_depth") == 2, done
        await _one_round(site.url("/"), tmp_path, crawl_args, "-D", "fetcher.follow_depth=0")
        # Off: round 2 fetches what round 1 left listed, p2.html, and nothing it links to.
        assert set(_pages(site.paths())) == {"/", "/p0.html", "/index.html", "/p1.html", "/p2.html"}


async def test_the_per_host_budget_leaves_the_rest_for_the_next_round(tmp_path, crawl_args):
    async with SiteServer(_chain_site(tmp_path / "site"), "127.0.0.1", 0) as site:
        result = await _one_round(site.url("/"), tmp_path, crawl_args, "-D", "fetcher.follow_max_per_host=2")
        assert len(_pages(site.paths())) == 3, site.paths()  # the seed and two followed
    done = _events(result.stderr, "fetch.done")
    assert done[0]["followed"] == 2 and done[0]["follow_skipped"]["max_per_host"] >= 1, done


async def test_the_queued_follow_budget_leaves_the_rest_for_the_next_round(tmp_path, crawl_args):
    """fetcher.follow_max_queued bounds the followed links waiting at once: the index's links past it are
    counted (queue_full) and fetched next round, each once; nothing is lost."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text("".join(f'<a href="p{n}.html">{n}</a>' for n in range(20)))
    for n in range(20):
        (root / f"p{n}.html").write_text(f"<html><body><p>page {n}</p></body></html>")
    async with SiteServer(root, "127.0.0.1", 0) as site:
        first = await _one_round(site.url("/"), tmp_path, crawl_args, "-D", "fetcher.follow_max_queued=5")
        assert len(_pages(site.paths())) == 1 + 5, site.paths()  # the seed and the five followed
        await _one_round(site.url("/"), tmp_path, crawl_args, "-D", "fetcher.follow_max_queued=5")
        requested = _pages(site.paths())
    done = _events(first.stderr, "fetch.done")
    assert done[0]["followed"] == 5 and done[0]["follow_skipped"]["queue_full"] == 15, done
    assert set(requested) == {"/", *(f"/p{n}.html" for n in range(20))}, requested
    assert all(count == 1 for count in requested.values()), requested


def _trap_app(hits: list[str]) -> web.Application:
    """/ links /real/ and /cal/; every /cal/... path shows its own path in one template and links next/,
    a/ and b/ (no two digests equal); /real/ has pages of its own."""

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        hits.append(path)
        if path == "/robots.txt":
            return web.Response(status=404)
        if path.startswith("/cal/"):
            links = "".join(f'<a href="{u}">{u}</a>' for u in ("next/", "a/", "b/"))
            body = f"<html><body><p>calendar at {path}</p>{links}</body></html>"
        elif path == "/":
            body = '<html><body><a href="/real/">real</a> <a href="/cal/">calendar</a></body></html>'
        elif path == "/real/":
            body = '<html><body><a href="one.html">1</a> <a href="two.html">2</a></body></html>'
        elif path in ("/real/one.html", "/real/two.html"):
            body = f'<html><body><p>{path}</p><a href="/real/">up</a></body></html>'
        else:
            return web.Response(status=404)
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app


async def test_a_trap_template_is_not_followed_past_its_first_page(tmp_path, crawl_args):
    hits: list[str] = []
    async with serve_app(_trap_app(hits)) as port:
        result = await _one_round(f"http://127.0.0.1:{port}/", tmp_path, crawl_args)
    # /cal/ and its three links; their pages link next/, a/, b/ again (the same links, relative): not followed.
    assert {"/", "/real/", "/real/one.html", "/real/two.html"} <= set(hits)
    assert sum(1 for p in hits if p.startswith("/cal/")) == 4, hits
    done = _events(result.stderr, "fetch.done")
    assert done[0]["follow_skipped"]["repeated_page"] >= 3, done


async def test_a_fetch_grown_large_by_following_parses_the_rest_in_a_pool(tmp_path, crawl_args):
    """Started at parse_pool_min_entries pages, the pool takes over once its process is up (pages parse in the
    fetch process meanwhile): every page has its parse row and its WARC record, whoever parsed it."""
    pages = 60
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text("".join(f'<a href="p{n}.html">{n}</a>' for n in range(pages)))
    for n in range(pages):
        (root / f"p{n}.html").write_text(f"<html><head><title>page {n}</title></head><body>text {n}</body></html>")
    # 0.1 s a page: the fetch outlasts the parse process's start, however loaded the machine.
    async with SiteServer(root, "127.0.0.1", 0, delay=0.1) as site:
        result = await _one_round(site.url("/"), tmp_path, crawl_args, "-D", "fetcher.parse_processes=1",
                                  "-D", "fetcher.parse_pool_min_entries=4", "-D", "fetcher.commit_records=3",
                                  "-D", "fetcher.per_host_concurrency=2")
    assert len(_events(result.stderr, "fetch.parse_pool")) == 1
    titles = {row["url"]: row["title"] for part in sorted(tmp_path.glob("segments/*/parse_data/part-*.parquet"))
              for row in pq.read_table(part).to_pylist()}
    assert {titles[site.url(f"/p{n}.html")] for n in range(pages)} == {f"page {n}" for n in range(pages)}
    fetched = [row["url"] for part in sorted(tmp_path.glob("segments/*/fetcher/part-*.parquet"))
               for row in pq.read_table(part).to_pylist()]
    assert len(fetched) == len(set(fetched)) == pages + 1
    records = 0
    for warc in sorted(tmp_path.glob("segments/*/content/part-*.warc.gz")):
        from warcio.archiveiterator import ArchiveIterator

        with open(warc, "rb") as fh:
            records += sum(1 for r in ArchiveIterator(fh) if r.rec_type == "response")
    assert records == pages + 1
