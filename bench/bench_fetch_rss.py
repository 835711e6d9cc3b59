"""Peak RSS of `crawler fetch` as the fetchlist grows (issue 8: 100k and 1M entries within 10 %).

    .venv/bin/python bench/bench_fetch_rss.py [--sizes 100000 1000000] [--hosts 100] [--real-every 20]

A segment of N fetchlist entries over --hosts loopback hosts (127.0.2.x), served by an aiohttp app in
this process: every --real-every-th entry is a real page (200, ~2 kB of HTML with links, parsed and
archived), the rest are under the robots.txt-disallowed /private/, so they go through the reader, the
host queues, the robots check and every output's rows without a request each (1M real requests would
take the loopback server, not the crawler, most of an hour). Each fetch runs as its own process started
by compare.py's launcher, which reports its peak RSS from wait4.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from compare import timed  # noqa: E402

from crawler.models import FETCHLIST  # noqa: E402
from crawler.segments.layout import Segment, part_name  # noqa: E402
from crawler.urls.normalize import host_of  # noqa: E402

PAGE = ("<html><head><title>page {n}</title></head><body>"
        + "<p>Some text of a page, repeated to make it a couple of kilobytes long.</p>" * 20
        + "<a href='/p/{a}.html'>a</a> <a href='/p/{b}.html'>b</a> <a href='/private/{n}.html'>c</a></body></html>")


async def handle(request: web.Request) -> web.StreamResponse:
    if request.path == "/robots.txt":
        return web.Response(text="User-agent: *\nDisallow: /private/\n")
    if request.path.startswith("/p/"):
        n = int(request.path[3:].split(".")[0])
        return web.Response(text=PAGE.format(n=n, a=n + 1, b=n + 2), content_type="text/html")
    return web.Response(status=404)


def write_fetchlist(seg: Segment, bases: list[str], entries: int, real_every: int) -> None:
    seg.dir("fetchlist").mkdir(parents=True)
    with pq.ParquetWriter(seg.dir("fetchlist") / part_name(0), FETCHLIST) as writer:
        for start in range(0, entries, 100_000):
            rows = []
            for i in range(start, min(entries, start + 100_000)):
                base = bases[i % len(bases)]
                path = f"/p/{i}.html" if i % real_every == 0 else f"/private/{i}.html"
                rows.append({"url": base + path, "host": host_of(base), "partition": 0,
                             "score": 1.0, "db_status": "unfetched", "retries": 0})
            writer.write_table(pa.Table.from_pylist(rows, schema=FETCHLIST))
    seg.mark_done("fetchlist")


async def fetch_rss(work: Path, bases: list[str], entries: int, real_every: int) -> dict:
    crawl_dir = work / f"crawl-{entries}"
    seg = Segment(crawl_dir / "segments" / "20261201T000000000Z")
    write_fetchlist(seg, bases, entries, real_every)
    cmd = [str(ROOT / ".venv" / "bin" / "crawler"), "fetch", str(seg.path), "-D", f"crawl_dir={crawl_dir}",
           "-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0",
           "-D", "fetcher.per_host_concurrency=2", "-D", "log.level=warning", "-D", "log.format=json"]
    # In a thread: this process's event loop serves the fetch's requests meanwhile.
    wall, cpu, rss_mb = await asyncio.to_thread(timed, cmd, work / f"fetch-{entries}.log")
    rows = sum(pq.read_metadata(p).num_rows for p in seg.parts("fetcher"))
    shutil.rmtree(crawl_dir)
    return {"entries": entries, "fetcher_rows": rows, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "peak_rss_mb": round(rss_mb, 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--real-every", type=int, default=20)
    args = parser.parse_args()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    bases = []
    for n in range(1, args.hosts + 1):
        site = web.TCPSite(runner, f"127.0.2.{n}", 0)
        await site.start()
        bases.append(f"http://127.0.2.{n}:{site._server.sockets[0].getsockname()[1]}")  # noqa: SLF001
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-fetch-rss-") as tmp:
            for entries in args.sizes:
                result = await fetch_rss(Path(tmp), bases, entries, args.real_every)
                print(json.dumps(result), flush=True)
                results.append(result)
    finally:
        await runner.cleanup()
    smallest, largest = results[0], results[-1]
    print(f"peak RSS {largest['entries']:,} / {smallest['entries']:,} entries: "
          f"{largest['peak_rss_mb'] / smallest['peak_rss_mb']:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
