"""How much of a request's CPU is aiohttp's own: a minimal HTTP/1.1 keep-alive client against bare aiohttp.

    .venv-bench/bin/python bench/probe_raw_http.py [--runs 3] [--port 18080]

On the URL list compare.py's floor gets (BENCH_WORK/urls.txt: pages, 404s, redirect sources; run
compare.py first), served by nginx as in compare.py, 256 workers, at most 2 requests per host at a
time, each contender in a fresh process, alternating; CPU from getrusage. "raw" is an asyncio.Protocol
per connection parsing with httptools (llhttp), connections kept per host, gzip inflated, and nothing
else a crawler needs (timeouts, limits, redirects, errors, TLS). It is a probe, not a client: it bounds
what replacing aiohttp could buy (docs/benchmarks.md). httptools lives in .venv-bench only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
import zlib
from collections import defaultdict
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


async def _raw(urls: list[str]) -> int:
    loop = asyncio.get_running_loop()
    idle: dict[str, list[_Connection]] = defaultdict(list)
    slots: dict[str, asyncio.Semaphore] = defaultdict(lambda: asyncio.Semaphore(PER_HOST))
    queue, done = list(reversed(urls)), 0

    async def worker() -> None:
        nonlocal done
        while queue:
            url = queue.pop()
            hostport, path = url.split("/")[2], "/" + url.split("/", 3)[3]
            async with slots[hostport]:
                if idle[hostport]:
                    connection = idle[hostport].pop()
                else:
                    host, port = hostport.split(":")
                    _, connection = await loop.create_connection(_Connection, host, int(port))
                _, headers, body = await connection.get(hostport, path)
                if any(name.lower() == b"content-encoding" for name, _ in headers):
                    body = zlib.decompress(body, 47)
                idle[hostport].append(connection)
            done += 1

    await asyncio.gather(*(worker() for _ in range(WORKERS)))
    return done


async def _aiohttp(urls: list[str]) -> int:
    import aiohttp

    slots: dict[str, asyncio.Semaphore] = defaultdict(lambda: asyncio.Semaphore(PER_HOST))
    queue, done = list(reversed(urls)), 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def worker() -> None:
            nonlocal done
            while queue:
                url = queue.pop()
                async with slots[url.split("/")[2]], session.get(url, allow_redirects=False) as response:
                    await response.read()
                done += 1

        await asyncio.gather(*(worker() for _ in range(WORKERS)))
    return done


def _child(mode: str, url_file: str) -> None:
    urls = [line.strip() for line in Path(url_file).read_text().splitlines() if line.strip()]
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    done = uvloop.run({"raw": _raw, "aiohttp": _aiohttp}[mode](urls))
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"{mode:8s} {done} requests  {cpu / done * 1e6:6.1f} us CPU per request  wall {time.monotonic() - start:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=18080)
    args = parser.parse_args()
    with Nginx(WORK / "web", args.port, WORK / "nginx"):
        for i in range(args.runs):
            for mode in ("raw", "aiohttp") if i % 2 == 0 else ("aiohttp", "raw"):
                subprocess.run([sys.executable, __file__, "--child", mode, str(WORK / "urls.txt")], check=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3])
    else:
        main()
