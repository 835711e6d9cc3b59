"""Fetch-process CPU of handing responses to the parse pool (``fetcher.parse_processes=1``), A/B of source trees.

Run: .venv/bin/python bench/bench_pool_handoff.py --tree old=DIR1 --tree new=DIR2 [--runs 5]

Each run is a fresh process that imports the tree's ``crawler``, starts a ParsePool with one parse
process and hands it a mix like the bench crawl's (bench/compare.py): per 1000 responses ~333
synthetic pages of ~38 kB HTML served gzip-encoded, parsed, and ~667 small 404s, archived only; 256
awaiting at once as the fetcher's workers do, on uvloop as the crawler runs. It reports
``time.thread_time`` of the event loop's thread per 1000 responses: what ``ParsePool.page`` costs the
fetch process (pickling, pipe writes, reading the answers, waking the awaiting task), nothing of HTTP.
Runs alternate between the trees.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import asyncio, gzip, sys, time
from crawler.config import load_config
from crawler.fetcher.parsepool import ParsePool
from crawler.protocols.base import Response

def page_html(i):
    links = "".join(f'<li><a href="/p/{j}.html">page {j} of the site</a> some words around it</li>' for j in range(60))
    return (f"<!DOCTYPE html><html><head><title>page {i}</title></head><body><h1>page {i}</h1>"
            + "<p>" + "lorem ipsum dolor sit amet " * 1200 + "</p><ul>" + links + "</ul></body></html>").encode()

HEADERS = [("Server", "nginx/1.22.1"), ("Date", "Mon, 30 Nov 2026 07:10:36 GMT"), ("Content-Type", "text/html"),
           ("Connection", "keep-alive")]

def responses(n):
    out = []
    for i in range(n):
        url = f"http://127.0.1.{i % 120 + 1}:18080/p/{i}.html"
        common = dict(http_version="1.1", request_headers=[("Host", "h"), ("User-Agent", "a")], peer_ip="127.0.1.1",
                      elapsed=0.01)
        if i % 3 == 0:
            body = page_html(i)
            out.append((url, Response(url, 200, "OK", HEADERS + [("Content-Encoding", "gzip")],
                                      gzip.compress(body, 6), body, **common), True))
        else:
            body = b"<html><body>404 Not Found</body></html>"
            out.append((url, Response(url, 404, "Not Found", list(HEADERS), body, body, **common), False))
    return out

async def main(n, concurrency):
    cfg = load_config(None, [])
    work = responses(n)
    with ParsePool(cfg, 1) as pool:
        async def one(url, response, parse):
            await pool.page(url, response, "text/html", parse, [])
        await asyncio.gather(*(one(*w) for w in work[:50]))  # warm: the parse process's imports
        sem = asyncio.Semaphore(concurrency)
        async def bounded(w):
            async with sem:
                await one(*w)
        started = time.thread_time()
        await asyncio.gather(*(bounded(w) for w in work))
        print((time.thread_time() - started) / n * 1e6)  # us a response = ms per 1000

import uvloop  # as the crawler runs its loop
uvloop.run(main(int(sys.argv[1]), 256))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--responses", type=int, default=3000)
    args = parser.parse_args()
    trees = dict(spec.partition("=")[::2] for spec in args.tree) or {"this": str(Path(__file__).parent.parent)}
    results: dict[str, list[float]] = {name: [] for name in trees}
    for i in range(args.runs):
        for name in list(trees) if i % 2 == 0 else list(trees)[::-1]:
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.responses)], capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": trees[name]}, check=True)
            ms = float(out.stdout.strip())
            results[name].append(ms)
            print(f"run {i} {name}: {ms:.1f} ms CPU per 1000 responses", flush=True)
    load = os.getloadavg()
    for name, values in results.items():
        print(f"{name}: median {statistics.median(values):.1f} ms per 1000 responses (load {load[0]:.2f})")


if __name__ == "__main__":
    main()
