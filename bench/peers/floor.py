"""The floor: a minimal aiohttp + uvloop + selectolax loop over a fixed URL list, writing nothing.

It does the least work any crawler must do per page (fetch, decompress, parse
title/text/links) with no politeness bookkeeping, no URL handling and no output,
so it bounds what a single asyncio process can reach. Prints one JSON line of
per-second page counts for the time plot.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import aiohttp
import uvloop
from selectolax.lexbor import LexborHTMLParser


async def main(urls: list[str], concurrency: int, per_host: int) -> None:
    start = time.monotonic()
    stamps: list[float] = []
    queue: asyncio.Queue[str] = asyncio.Queue()
    for url in urls:
        queue.put_nowait(url)
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=per_host)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while not queue.empty():
                url = queue.get_nowait()
                try:
                    async with session.get(url, allow_redirects=False) as resp:
                        body = await resp.read()
                except aiohttp.ClientError:
                    continue
                if resp.status != 200:
                    continue
                tree = LexborHTMLParser(body)
                title = tree.css_first("title")
                _ = title.text() if title else ""
                _ = tree.body.text(separator=" ") if tree.body else ""
                _ = [a.attributes.get("href") for a in tree.css("a[href]")]
                stamps.append(time.monotonic() - start)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    counts: dict[int, int] = {}
    for t in stamps:
        counts[int(t)] = counts.get(int(t), 0) + 1
    print(json.dumps({"pages": len(stamps), "per_second": counts}))


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        url_list = [line.strip() for line in fh if line.strip()]
    uvloop.run(main(url_list, int(sys.argv[2]), int(sys.argv[3])))
