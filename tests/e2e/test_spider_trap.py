"""Spider traps of the shape real sites have, crawled 10 rounds: a few dozen requests into each, every normal page.

The web (one aiohttp app, its request log the judge): normal pages in several
folders, among them two byte-identical indexes of mirrored trees (``/v1/``,
``/v2/``) whose relative links reach different pages, and a page 20 path
segments deep; an exact trap (``/trap/``: every path serves one page linking ``next/``,
``a/`` and ``b/``) and a near-duplicate trap (``/cal/``: the same, but each page
shows its own path in a long calendar template, so no two digests are equal).
"""

from __future__ import annotations

import random
import re

from aiohttp import web

from tests.conftest import run_crawler, serve_app

ROUNDS = 10
DEEP = 18  # folders between /deep/ and its leaf page: 20 path segments in all


def own_text(seed: str, words: int = 300) -> str:
    """Words of a page's own (seeded, the same on every request)."""
    rng = random.Random(seed)
    return " ".join("".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(words))


TEMPLATE = own_text("calendar", 2500)  # a calendar's page, about 15 kB of text as real pages have


def _page(title: str, links: list[str], text: str = "") -> web.Response:
    anchors = "".join(f'<a href="{u}">{u}</a>\n' for u in links)
    return web.Response(text=f"<html><head><title>{title}</title></head><body><p>{text}</p>{anchors}</body></html>",
                        content_type="text/html")


def normal_pages() -> dict[str, list[str]]:
    """Path -> its links (relative as served), for every page a crawl must fetch."""
    pages: dict[str, list[str]] = {
        "/": ["/docs/", "/v1/index.html", "/v2/index.html", "/deep/", "/trap/", "/cal/"],
        "/docs/": ["one.html", "two.html", "sub/three.html"],
        "/docs/one.html": ["two.html"],
        "/docs/two.html": ["/docs/"],
        "/docs/sub/three.html": ["../one.html"],
        # Byte-identical pages in two trees; each relative link reaches its own tree's page.
        "/v1/index.html": ["intro.html"],
        "/v2/index.html": ["intro.html"],
        "/v1/intro.html": [],
        "/v2/intro.html": [],
    }
    # A page as deep as urls.max_path_depth (20) allows, linked from one folder up top.
    leaf = "/deep/" + "".join(f"l{level}/" for level in range(DEEP)) + "page.html"
    pages["/deep/"] = [leaf[len("/deep/"):]]
    pages[leaf] = []
    return pages


def trap_app(hits: list[str]) -> web.Application:
    pages = normal_pages()

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        hits.append(path)
        if path == "/robots.txt":
            return web.Response(status=404)
        if path.startswith("/trap/"):
            return _page("trap", ["next/", "a/", "b/"], TEMPLATE)
        if path.startswith("/cal/"):
            return _page("calendar", ["next/", "a/", "b/"], f"{TEMPLATE} You are at {path}.")
        if path in pages:
            # Identical bodies for the mirrored indexes: the title and text do not name the tree.
            title = "index" if path.endswith("/index.html") else path
            return _page(title, pages[path], own_text(title))
        return web.Response(status=404)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app


async def _crawl(tmp_path, crawl_args, *extra: str) -> tuple[list[str], dict]:
    hits: list[str] = []
    async with serve_app(trap_app(hits)) as port:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"http://127.0.0.1:{port}/\n")
        result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", str(ROUNDS), *crawl_args, *extra)
    assert result.code == 0, result.stderr[-3000:]
    return hits, {"events": result.events()}


async def test_traps_take_a_few_dozen_requests_and_every_normal_page_is_fetched(tmp_path, crawl_args):
    """Over 10 rounds: a few requests into the exact trap, a few dozen into the near-duplicate one, all pages."""
    hits, out = await _crawl(tmp_path, crawl_args)
    print({"requests": len(hits), "trap": sum(p.startswith("/trap/") for p in hits),
           "cal": sum(p.startswith("/cal/") for p in hits)})
    missing = [p for p in normal_pages() if p not in hits]
    assert missing == []
    trap = [p for p in hits if p.startswith("/trap/")]
    cal = [p for p in hits if p.startswith("/cal/")]
    # /trap/ and its three links; their outlinks are not followed (same digest as /trap/, below its folder).
    assert len(trap) == 4, trap
    assert len(cal) <= 40, cal
    events = out["events"]
    suspected = [e for e in events if e["event"] == "host.trap_suspected"]
    assert [re.sub(r"^http://[^/]+", "", e["prefix"]) for e in suspected] == ["/cal/"]
    done = [e for e in events if e["event"] == "updatedb.done"]
    assert sum(e["unfollowed_pages"] for e in done) >= 3
    assert sum(e["unfollowed_outlinks"] for e in done) >= 9
