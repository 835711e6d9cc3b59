"""fetcher.parse_processes: parsing and part writing in worker processes give the same segment as in-process."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import gzip
import os

import pytest
import structlog
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from crawler.config import usable_cores
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.service import fetch_segment
from crawler.memory import PAGE_GC_THRESHOLD, collect_for_pages
from crawler.segments.layout import Segment
from tests.fetcher.conftest import make_cfg, make_segment, page, read_rows, redirect, robots

HTML = ("<html><head><title>Page {n}</title></head><body><p>Hello <b>wor</b>ld {n}</p>"
        "<a href='/p{m}'>next</a> <a href='http://127.0.0.9/x#frag'>away</a></body></html>")


def _gzipped(text: str):
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=gzip.compress(text.encode()), content_type="text/html",
                            headers={"Content-Encoding": "gzip"})

    return handler


def _routes() -> dict:
    routes = {f"/p{n}": page(HTML.format(n=n, m=n + 1)) for n in range(6)}
    routes["/z"] = _gzipped(HTML.format(n="z", m=0))
    routes["/u"] = page(HTML.format(n="\u00fcber \u2018\u6771\u4eac\u2019\u00a0\u3000 caf\u00e9", m=0))  # wider than Latin-1
    routes["/moved"] = redirect("/p5")
    routes["/robots.txt"] = robots("User-agent: *\nDisallow: /private\nSitemap: http://127.0.0.1/sitemap.xml\n")
    return routes


def _segment_view(seg: Segment) -> dict:
    """Everything a reader sees in the segment, minus times, sorted by URL."""
    def rows(output: str) -> list[dict]:
        drop = {"fetch_time", "elapsed_ms"}
        return sorted(({k: v for k, v in r.items() if k not in drop} for r in read_rows(seg, output)),
                      key=lambda r: r["url"])

    payloads = []
    for part in seg.parts("content", "warc.gz"):
        with open(part, "rb") as fh:
            payloads += [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read())
                         for r in ArchiveIterator(fh, check_digests="raise") if r.rec_type != "warcinfo"]
    return {"fetcher": rows("fetcher"), "parse_text": rows("parse_text"), "parse_data": rows("parse_data"),
            "content": sorted(payloads, key=lambda p: (p[1], p[0]))}


class TestParsePool:
    async def test_same_segment_as_parsing_in_the_fetch_process(self, tmp_path, servers):
        """Titles, text, outlinks (and the robots.txt sitemap), statuses and WARC records do not change."""
        site = await servers("127.0.0.1", _routes())
        urls = [site.url(p) for p in ("/p0", "/p1", "/p2", "/z", "/u", "/moved", "/private", "/gone")]
        views = []
        for name, processes in (("inline", 0), ("pool", 2)):
            cfg = make_cfg(tmp_path / name, f"fetcher.parse_processes={processes}", "fetcher.commit_records=3")
            seg = make_segment(tmp_path / name, urls)
            with ParsePool(cfg, processes) if processes else contextlib.nullcontext() as pool:
                report = await fetch_segment(cfg, seg, structlog.get_logger(), parse_pool=pool)
            assert not report.stopped and seg.is_done("parse_data")
            views.append(_segment_view(seg))
        inline, pooled = views
        assert pooled == inline
        data = {r["url"]: r for r in pooled["parse_data"]}
        assert data[site.url("/z")]["title"] == "Page z"
        assert {o["url"] for o in data[site.url("/p0")]["outlinks"]} >= {site.url("/p1"), "http://127.0.0.9/x"}
        sitemaps = [r for r in pooled["parse_data"] if {"url": "http://127.0.0.1/sitemap.xml", "anchor": "sitemap"}
                    in r["outlinks"]]
        assert len(sitemaps) == 1
        text = {r["url"]: r["text"] for r in pooled["parse_text"]}
        assert "Hello world 1" in text[site.url("/p1")]
        # A parse process sends the text as UTF-8 bytes: the part holds the same characters as parsed here.
        assert "Hello world \u00fcber \u2018\u6771\u4eac\u2019 caf\u00e9" in text[site.url("/u")]

    def test_one_pool_serves_several_event_loops(self, tmp_path):
        """crawl runs each round in a new event loop and keeps the pool: it keeps answering."""
        cfg = make_cfg(tmp_path, "fetcher.parse_processes=1")
        body = HTML.format(n=1, m=2).encode()
        with ParsePool(cfg, 1) as pool:
            for _ in range(2):
                async def round_() -> list:
                    return await asyncio.gather(*(pool.parse(body, f"http://127.0.0.1/p{i}", "text/html")
                                                  for i in range(40)))
                results = asyncio.run(round_())
                assert [r[1]["url"] for r in results] == [f"http://127.0.0.1/p{i}" for i in range(40)]
                assert all(r[2] == "success" and r[1]["title"] == "Page 1" for r in results)

    def test_config_key_bounds(self, tmp_path):
        """fetcher.parse_processes is a count, 0 (parse in the fetch process) or more, or "auto" (the default):
        one per usable core, for a lone fetch process only."""
        cores = len(os.sched_getaffinity(0))
        assert make_cfg(tmp_path).fetcher.parse_processes == cores == usable_cores()
        assert make_cfg(tmp_path, "fetcher.parse_processes=auto").fetcher.parse_processes == cores
        assert make_cfg(tmp_path, "fetcher.processes=2").fetcher.parse_processes == 0
        assert make_cfg(tmp_path, "fetcher.parse_processes=0").fetcher.parse_processes == 0
        with pytest.raises(Exception, match="parse_processes"):
            make_cfg(tmp_path, "fetcher.parse_processes=-1")



@pytest.mark.parametrize("increment", [0, 7])
def test_parse_processes_run_fetcher_parse_nice_levels_below_the_fetch_process(tmp_path, increment):
    """Each parse process lowers its own priority by fetcher.parse_nice before it says it is ready (the fetch
    process, woken by every response, then gets a core first); 0 leaves it at the fetch process's."""
    cfg = make_cfg(tmp_path, "fetcher.parse_processes=2", f"fetcher.parse_nice={increment}")
    own = os.getpriority(os.PRIO_PROCESS, 0)
    with ParsePool(cfg, 2) as pool:
        assert all(ready.poll(60) for ready in pool._ready)  # each one's "ready", sent after the change
        nices = [os.getpriority(os.PRIO_PROCESS, child.pid) for child in pool._children]
        rows = asyncio.run(pool.parse(HTML.format(n=1, m=2).encode(), "http://127.0.0.1/p1", "text/html"))
    assert nices == [min(own + increment, 19)] * 2
    assert rows[0]["text"] == "Hello world 1 next away"


def test_a_parse_process_freezes_its_set_up_and_collects_every_20000_objects():
    """What a parse process runs before it says it is ready: its heap so far frozen, the young generation
    collected at PAGE_GC_THRESHOLD, as in the fetch process (a page's parse makes ~800 objects and no cycles)."""
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        collect_for_pages()
        assert gc.get_threshold() == PAGE_GC_THRESHOLD == (20_000, 20, 20)
        assert gc.get_freeze_count() > frozen
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def test_parse_nice_bounds(tmp_path):
    """A niceness goes from 0 to 19; raising a process's priority (a negative increment) needs privileges."""
    assert make_cfg(tmp_path).fetcher.parse_nice == 10
    for bad in ("-1", "20"):
        with pytest.raises(Exception, match="parse_nice"):
            make_cfg(tmp_path, f"fetcher.parse_nice={bad}")


def test_a_parse_process_does_not_load_pyarrow(tmp_path):
    """Parquet is written by the fetch process (which has Arrow loaded for the webdb jobs anyway): a parse
    process without pyarrow is ~70 MB less resident, in every one of them (the peak memory of a crawl is the
    sum over its processes)."""
    cfg = make_cfg(tmp_path, "fetcher.parse_processes=1")
    with ParsePool(cfg, 1) as pool:
        rows = asyncio.run(pool.parse(HTML.format(n=1, m=2).encode(), "http://127.0.0.1/p1", "text/html"))
        assert rows[0]["text"] == "Hello world 1 next away"
        parser = next(child for child in pool._children if child.name == "parse-0")
        with open(f"/proc/{parser.pid}/maps") as maps:
            mapped = maps.read()
    assert "libarrow" not in mapped
    assert "selectolax" in mapped  # the maps of the process that parsed, not of another


def test_a_parse_process_loads_lxml_with_its_first_xml_document(tmp_path):
    """lxml (~4 MB resident) serves sitemaps and feeds: a parse process that parsed only HTML has not loaded it."""
    cfg = make_cfg(tmp_path, "fetcher.parse_processes=1")
    sitemap = (b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               b"<url><loc>http://127.0.0.1/a</loc></url></urlset>")

    def maps(pool: ParsePool) -> str:
        parser = next(child for child in pool._children if child.name == "parse-0")
        with open(f"/proc/{parser.pid}/maps") as mapped:
            return mapped.read()

    with ParsePool(cfg, 1) as pool:
        asyncio.run(pool.parse(HTML.format(n=1, m=2).encode(), "http://127.0.0.1/p1", "text/html"))
        before = maps(pool)
        rows = asyncio.run(pool.parse(sitemap, "http://127.0.0.1/sitemap.xml", "application/xml"))
        after = maps(pool)
    assert [url for url, _ in rows[1]["outlinks"]] == ["http://127.0.0.1/a"]
    assert "selectolax" in before and "lxml" not in before
    assert "lxml" in after


async def test_the_pool_is_its_parse_processes_and_the_fetch_writes_every_part(tmp_path, servers):
    """No process of the pool writes: the parse process hands each page's WARC records and rows back, and the
    fetch process writes them into its parts (two pages a part here), none missing."""
    site = await servers("127.0.0.1", _routes())
    cfg = make_cfg(tmp_path, "fetcher.parse_processes=1", "fetcher.commit_records=2")
    seg = make_segment(tmp_path, [site.url("/p0"), site.url("/z"), site.url("/p1")])
    with ParsePool(cfg, 1) as pool:
        assert [child.name for child in pool._children] == ["parse-0"]
        report = await fetch_segment(cfg, seg, structlog.get_logger(), parse_pool=pool)
    assert not report.stopped and seg.is_done("parse_data")
    urls = sorted(site.url(p) for p in ("/p0", "/p1", "/z"))
    assert sorted(r["url"] for r in read_rows(seg, "parse_text")) == urls
    assert sorted(r["url"] for r in read_rows(seg, "fetcher")) == urls
    assert sorted(uri for kind, uri, _ in _segment_view(seg)["content"] if kind == "response") == urls
    assert len(seg.parts("fetcher")) == 2


def _resident_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_a_parse_process_gives_back_a_big_pages_heap(tmp_path):
    """A page's tree is freed when its parse ends, but glibc keeps the heap it grew; after a page of a
    megabyte or more the parse process trims it, so it does not stay that much larger for the rest of a
    crawl (two parse processes at ~110 MB each instead of ~55 in bench/realweb.py). This 2.6 MB page left
    the process 45 MB larger untrimmed, 13 MB trimmed (what stays is Python's own small-object arenas)."""
    cfg = make_cfg(tmp_path, "fetcher.parse_processes=1")
    rows = "".join(f"<tr><td><a href='/r{i}.html'>row {i}</a></td><td>{'cell ' * 8}</td></tr>" for i in range(25_000))
    big = f"<html><body><table>{rows}</table></body></html>".encode()
    assert len(big) > 2 << 20
    with ParsePool(cfg, 1) as pool:
        parser = next(child for child in pool._children if child.name == "parse-0")
        asyncio.run(pool.parse(HTML.format(n=1, m=2).encode(), "http://127.0.0.1/p1", "text/html"))
        before = _resident_mb(parser.pid)
        parsed = asyncio.run(pool.parse(big, "http://127.0.0.1/big", "text/html"))
        assert parsed[2] == "success" and len(parsed[1]["outlinks"]) == 25_000
        # The answer is sent before the trim: the next page's answer comes after it.
        asyncio.run(pool.parse(HTML.format(n=2, m=3).encode(), "http://127.0.0.1/p2", "text/html"))
        after = _resident_mb(parser.pid)
    assert after - before < 25, (before, after)


def _peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def test_big_pages_are_parsed_one_at_a_time(tmp_path):
    """Pages of a megabyte or more all go to the first parse process, so their trees (~13 times the page) never
    add up across the pool; small pages still go to whichever process has least waiting."""
    cfg = make_cfg(tmp_path, "fetcher.parse_processes=2")
    rows = "".join(f"<tr><td><a href='/r{i}.html'>row {i}</a></td><td>{'cell ' * 8}</td></tr>" for i in range(15_000))
    big = f"<html><body><table>{rows}</table></body></html>".encode()
    assert len(big) > 1 << 20

    async def parse_all(pool: ParsePool) -> list:
        sent = []
        for i in range(44):
            body = big if i % 11 == 0 else HTML.format(n=i, m=i).encode()
            sent.append(asyncio.ensure_future(pool.parse(body, f"http://127.0.0.1/p{i}", "text/html")))
            for _ in range(2):  # the call, then its send: the pipe it went to counts it as waiting
                await asyncio.sleep(0)
        return await asyncio.gather(*sent)

    with ParsePool(cfg, 2) as pool:
        first, second = (next(c for c in pool._children if c.name == name) for name in ("parse-0", "parse-1"))
        asyncio.run(pool.parse(HTML.format(n=1, m=2).encode(), "http://127.0.0.1/p1", "text/html"))
        base = {first.pid: _peak_mb(first.pid), second.pid: _peak_mb(second.pid)}
        answers = asyncio.run(parse_all(pool))
        grown = {pid: _peak_mb(pid) - mb for pid, mb in base.items()}
        waiting = sum(link.in_pipe for link in pool._parsers)  # every answer is in
    assert all(a[2] == "success" for a in answers) and waiting == 0
    assert grown[first.pid] > 15, grown  # a big page's tree, in the first process
    assert grown[second.pid] < 8, grown  # small pages only


def test_pages_go_to_the_process_with_least_given_and_unanswered(tmp_path):
    """Pages handed over in one turn of the loop (before any is written to a pipe) alternate between the two
    processes: what waits in a process's queue counts as much as what its pipe holds."""
    cfg = make_cfg(tmp_path, "fetcher.parse_processes=2")
    body = ("<html><body>" + "<p>words and more words</p>" * 8000 + "</body></html>").encode()  # ~200 kB

    async def hand_over(pool: ParsePool) -> tuple[list[int], list]:
        sent = [asyncio.ensure_future(pool.parse(body, f"http://127.0.0.1/p{i}", "text/html")) for i in range(12)]
        await asyncio.sleep(0)  # the calls ran; their pipes are written on the next turn
        given = [link.in_pipe + link.waiting for link in pool._parsers]
        return given, await asyncio.gather(*sent)

    with ParsePool(cfg, 2) as pool:
        given, answers = asyncio.run(hand_over(pool))
        left = [link.in_pipe + link.waiting for link in pool._parsers]
    assert given[0] == given[1] > 5 * len(body), given  # six pages each
    assert all(a[2] == "success" for a in answers) and left == [0, 0]
