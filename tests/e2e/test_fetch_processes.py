"""`crawler fetch` with fetcher.processes=2: the partitions are shared out, the segment completes once."""

from __future__ import annotations

from collections import Counter

from aiohttp import web

from tests.conftest import ROOT, run_crawler
from tests.fetcher.conftest import Server, make_segment, read_rows


async def test_two_processes_fetch_every_partition_once(tmp_path):
    """Two fetch processes over four partitions record every URL exactly once and mark the segment done."""
    async def handler(request):
        return web.Response(text=f"<html><title>{request.path}</title><a href='/x'>x</a></html>",
                            content_type="text/html")

    servers = []
    for i in range(1, 7):
        server = Server(f"127.0.0.{i}", {f"/p{j}": handler for j in range(10)})
        await server.start()
        servers.append(server)
    try:
        urls = [s.url(f"/p{j}") for s in servers for j in range(10)]
        seg = make_segment(tmp_path, urls, partitions=4)
        result = await run_crawler("fetch", str(seg.path), "-D", f"crawl_dir={tmp_path}",
                                   "-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0",
                                   "-D", "fetcher.processes=2", "-D", "log.format=json", cwd=ROOT)
    finally:
        for server in servers:
            await server.runner.cleanup()
    assert result.code == 0, result.stderr[-2000:]
    counts = Counter(r["url"] for r in read_rows(seg))
    assert set(counts) == set(urls) and max(counts.values()) == 1
    starts = [e for e in result.events() if e["event"] == "fetch.start"]
    assert len(starts) == 2
    assert sorted(p for e in starts for p in e["partitions"]) == [0, 1, 2, 3]
    assert (seg.path / "fetcher" / "_SUCCESS").exists()
