"""CPU a request costs in aiohttp against pyreqwest (Rust's reqwest and hyper), on the real trees' pages.

    .venv-bench/bin/python bench/probe_http_clients.py [--runs 3] [--port 18386]

The seven core sites of bench/realsites.py, served by its nginx; every HTML file of each tree requested
once, the sites interleaved, 256 workers, at most 2 requests per site at a time (the real-site bench's
settings), no redirects followed, each body read whole. Each client runs in a fresh process, the clients
alternating run by run; CPU from getrusage (every thread of the process: reqwest runs its own). Bare
clients, no crawler around them: what a change of HTTP client could buy a crawl, not what the crawler's
HTTP path costs today (bench/bench_http_path.py measures that one). pyreqwest lives in .venv-bench only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realsites import SITES, WORK, Sites, address, prepare  # noqa: E402

CLIENTS = ("aiohttp", "pyreqwest")
WORKERS, PER_HOST = 256, 2


def site_urls(port: int) -> list[str]:
    """Every HTML file of the seven core trees as a URL, one site after another in turn."""
    per_site = []
    for index, site in enumerate(SITES[:7]):
        root = prepare(site)
        paths = sorted("/" + str(p.relative_to(root)) for p in root.rglob("*.html"))
        per_site.append([f"http://{address(index)}:{port}{path}" for path in paths])
    urls: list[str] = []
    for turn in range(max(map(len, per_site))):
        urls += [paths[turn] for paths in per_site if turn < len(paths)]
    return urls


async def _drive(urls: list[str], fetch: Callable[[str], Awaitable[int]]) -> int:
    limits: defaultdict[str, asyncio.Semaphore] = defaultdict(lambda: asyncio.Semaphore(PER_HOST))
    todo = iter(urls)
    done = 0

    async def worker() -> None:
        nonlocal done
        for url in todo:
            async with limits[url.split("/")[2]]:
                await fetch(url)
            done += 1  # after the await: `done += await ...` reads done before it, and loses counts
    await asyncio.gather(*(worker() for _ in range(WORKERS)))
    return done


async def _aiohttp(urls: list[str]) -> int:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=WORKERS, limit_per_host=PER_HOST)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def fetch(url: str) -> int:
            async with session.get(url, allow_redirects=False) as response:
                return len(await response.read())
        return await _drive(urls, fetch)


async def _pyreqwest(urls: list[str]) -> int:
    from pyreqwest.client import ClientBuilder

    client = ClientBuilder().follow_redirects(False).pool_max_idle_per_host(PER_HOST).build()
    try:
        async def fetch(url: str) -> int:
            response = await client.get(url).build().send()
            return len(await response.bytes())
        return await _drive(urls, fetch)
    finally:
        await client.close()


def one_client(name: str, urls_file: Path) -> None:
    """In a fresh process: fetch every URL with one client, print its figures as JSON."""
    import uvloop

    urls = urls_file.read_text().split()
    run = {"aiohttp": _aiohttp, "pyreqwest": _pyreqwest}[name]
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    done = uvloop.run(run(urls))
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    print(json.dumps({"requests": done, "wall": wall, "cpu": cpu}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=18386)
    parser.add_argument("--one", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--urls", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one_client(args.one, args.urls)
        return
    urls = site_urls(args.port)
    urls_file = WORK / "probe-http-urls.txt"
    urls_file.parent.mkdir(parents=True, exist_ok=True)
    urls_file.write_text("\n".join(urls) + "\n")
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in CLIENTS}
    with Sites([(site, prepare(site)) for site in SITES[:7]], args.port, WORK / "nginx-probe-http"):
        for run in range(args.runs):
            for name in CLIENTS if run % 2 == 0 else reversed(CLIENTS):
                out = subprocess.run([sys.executable, __file__, "--one", name, "--urls", str(urls_file)],
                                     capture_output=True, text=True, check=True).stdout
                seen = json.loads(out)
                if seen["requests"] != len(urls):
                    raise SystemExit(f"{name} fetched {seen['requests']} of {len(urls)} URLs")
                figures[name].append(seen)
                print(f"run {run} {name:10s} {seen['wall']:6.2f} s wall  {seen['cpu']:6.2f} CPU s  "
                      f"{1e6 * seen['cpu'] / len(urls):6.1f} us CPU a request")
    print(f"\n{len(urls)} URLs, medians of {args.runs} runs:")
    for name, runs in figures.items():
        cpu = statistics.median(r["cpu"] for r in runs)
        wall = statistics.median(r["wall"] for r in runs)
        print(f"  {name:10s} {1e6 * cpu / len(urls):6.1f} us CPU a request, {wall:.2f} s wall")


if __name__ == "__main__":
    main()
