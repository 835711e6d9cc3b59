"""How much of a request's CPU is aiohttp's own: a minimal HTTP/1.1 keep-alive client against bare aiohttp.

    .venv-bench/bin/python bench/probe_raw_http.py [--runs 3] [--port 18080]
    .venv-bench/bin/python bench/probe_raw_http.py --web realsites --clients aiohttp,pyreqwest --runs 5

``--web generated`` (the default): the URL list compare.py's floor gets (BENCH_WORK/urls.txt: pages, 404s,
redirect sources; run compare.py first), served by nginx as in compare.py. ``--web realsites``: every HTML
file of bench/realsites.py's seven core trees, served by its nginx, the sites interleaved. 256 workers, at
most 2 requests per host at a time, no redirects followed, each body read whole, each client in a fresh
process, alternating; CPU from getrusage (every thread of the process: reqwest runs its own); medians
printed at the end. "raw" is an asyncio.Protocol per connection parsing with httptools (llhttp),
connections kept per host, gzip inflated, and nothing else a crawler needs (timeouts, limits, redirects,
errors, TLS). It is a probe, not a client: it bounds what replacing aiohttp could buy. "pyreqwest" is a
well-kept client (Rust's reqwest and hyper behind an asyncio API): what a change of library would buy
(docs/benchmarks.md). httptools and pyreqwest live in .venv-bench only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nginx import Nginx  # noqa: E402

WORK = Path(os.environ.get("BENCH_WORK", Path(__file__).resolve().parent / ".work"))
WORKERS, PER_HOST = 256, 2


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self) -> None:
        import httptools

        self.parser = httptools.HttpResponseParser(self)
        self.transport: Any = None
        self.waiter: asyncio.Future[tuple[int, list[tuple[bytes, bytes]], bytes]] | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None:
            waiter.set_result((self.parser.get_status_code(), self.headers, b"".join(self.chunks)))
        self.headers, self.chunks = [], []

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("closed"))

    async def get(self, hostport: str, path: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(f"GET {path} HTTP/1.1\r\nHost: {hostport}\r\nUser-Agent: probe\r\n"
                             "Accept: */*\r\nAccept-Encoding: gzip\r\n\r\n".encode())
        return await self.waiter


async def _drive(urls: list[str], fetch: Callable[[str], Awaitable[None]]) -> int:
    """Every URL through ``fetch``, by WORKERS workers, at most PER_HOST at a time on one host; the count done."""
    slots: dict[str, asyncio.Semaphore] = defaultdict(lambda: asyncio.Semaphore(PER_HOST))
    queue, done = list(reversed(urls)), 0

    async def worker() -> None:
        nonlocal done
        while queue:
            url = queue.pop()
            async with slots[url.split("/")[2]]:
                await fetch(url)
            done += 1

    await asyncio.gather(*(worker() for _ in range(WORKERS)))
    return done


async def _raw(urls: list[str]) -> int:
    loop = asyncio.get_running_loop()
    idle: dict[str, list[_Connection]] = defaultdict(list)

    async def fetch(url: str) -> None:
        hostport, path = url.split("/")[2], "/" + url.split("/", 3)[3]
        if idle[hostport]:
            connection = idle[hostport].pop()
        else:
            host, port = hostport.split(":")
            _, connection = await loop.create_connection(_Connection, host, int(port))
        _, headers, body = await connection.get(hostport, path)
        if any(name.lower() == b"content-encoding" for name, _ in headers):
            body = zlib.decompress(body, 47)
        idle[hostport].append(connection)

    return await _drive(urls, fetch)


async def _aiohttp(urls: list[str]) -> int:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def fetch(url: str) -> None:
            async with session.get(url, allow_redirects=False) as response:
                await response.read()

        return await _drive(urls, fetch)


async def _pyreqwest(urls: list[str]) -> int:
    from pyreqwest.client import ClientBuilder

    client = ClientBuilder().follow_redirects(False).pool_max_idle_per_host(PER_HOST).build()

    async def fetch(url: str) -> None:
        response = await client.get(url).build().send()
        await response.bytes()

    try:
        return await _drive(urls, fetch)
    finally:
        await client.close()


CLIENTS = {"raw": _raw, "aiohttp": _aiohttp, "pyreqwest": _pyreqwest}


def _child(mode: str, url_file: str) -> None:
    urls = [line.strip() for line in Path(url_file).read_text().splitlines() if line.strip()]
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    done = uvloop.run(CLIENTS[mode](urls))
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(json.dumps({"requests": done, "cpu": cpu, "wall": time.monotonic() - start}))


def _realsites(port: int) -> tuple[Any, Path]:
    """bench/realsites.py's nginx serving its seven core trees, and a file of every HTML file of them as a URL,
    one site after another in turn."""
    from realsites import SITES, Sites, address, prepare
    from realsites import WORK as SITES_WORK

    served = [(site, prepare(site)) for site in SITES]
    per_site = [[f"http://{address(index)}:{port}/{path.relative_to(root)}" for path in sorted(root.rglob("*.html"))]
                for index, (_, root) in enumerate(served)]
    urls = [paths[turn] for turn in range(max(map(len, per_site))) for paths in per_site if turn < len(paths)]
    url_file = SITES_WORK / "probe-http-urls.txt"
    url_file.parent.mkdir(parents=True, exist_ok=True)
    url_file.write_text("\n".join(urls) + "\n")
    return Sites(served, port, SITES_WORK / "nginx-probe-http"), url_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--web", choices=("generated", "realsites"), default="generated")
    parser.add_argument("--clients", default="raw,aiohttp", help=f"comma-separated, of {', '.join(CLIENTS)}")
    args = parser.parse_args()
    clients = args.clients.split(",")
    if unknown := set(clients) - set(CLIENTS):
        parser.error(f"unknown clients: {', '.join(sorted(unknown))}")
    if args.web == "realsites":
        server, url_file = _realsites(args.port)
    else:
        server, url_file = Nginx(WORK / "web", args.port, WORK / "nginx"), WORK / "urls.txt"
    seen: dict[str, list[dict[str, float]]] = {mode: [] for mode in clients}
    with server:
        for i in range(args.runs):
            for mode in clients if i % 2 == 0 else clients[::-1]:
                out = subprocess.run([sys.executable, __file__, "--child", mode, str(url_file)],
                                     capture_output=True, text=True, check=True).stdout
                run = json.loads(out)
                seen[mode].append(run)
                print(f"{mode:9s} {run['requests']} requests  {run['cpu'] / run['requests'] * 1e6:6.1f} us CPU per "
                      f"request  wall {run['wall']:.2f} s", flush=True)
    print(f"\nmedians of {args.runs} runs:")
    for mode, runs in seen.items():
        per_request = statistics.median(r["cpu"] / r["requests"] for r in runs)
        print(f"  {mode:9s} {per_request * 1e6:6.1f} us CPU per request  wall {statistics.median(r['wall'] for r in runs):.2f} s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3])
    else:
        main()
