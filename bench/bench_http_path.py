"""CPU per request of the crawler's HTTP path alone (HttpProtocol.fetch), A/B of source trees.

Run: .venv-bench/bin/python bench/bench_http_path.py --tree old=DIR1 --tree new=DIR2 [--runs 3] [--floor]
(without --tree: this checkout against the floor's HTTP half)

The same generated web as bench/compare.py (sitegen, 120 hosts x 50 pages, served
by nginx on 127.0.1.N) and the same URL list the floor gets (every URL a crawl
requested: pages, 404s, redirect sources) if compare.py left one in its work
folder, else every page and robots.txt of the web. Each run is a fresh process
that imports the tree's ``crawler`` (PYTHONPATH), then fetches every URL through
``HttpProtocol.fetch`` with 256 workers and at most 2 requests per host at a
time, body read, decoded and capped as in a crawl, and nothing else: no parse,
no politeness, no writing. It reports the CPU seconds (user + sys, from
getrusage) spent from the first request to the last, per 1000 requests. Runs
alternate between the trees; medians are printed. CPU per request moves far
less with the machine's load than wall time does. ``--floor`` adds the HTTP half
of bench/peers/floor.py: bare aiohttp ``session.get`` and ``resp.read()`` with
aiohttp's own decompression, the same 256 workers and 2 per host, no limits.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nginx import Nginx  # noqa: E402
from sitegen import generate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("BENCH_WORK", ROOT / "bench" / ".work"))

_CHILD = r"""
import asyncio, json, resource, sys, time
from collections import defaultdict
import uvloop
from crawler.config import load_config
from crawler.protocols.http import HttpProtocol

urls = [line.strip() for line in open(sys.argv[1]) if line.strip()]

async def main():
    cfg = load_config(None, ["http.allow_private_networks=true"])
    proto = HttpProtocol(cfg)
    hosts = defaultdict(lambda: asyncio.Semaphore(2))
    queue = list(reversed(urls))
    statuses = defaultdict(int)

    async def worker():
        while queue:
            url = queue.pop()
            async with hosts[url.split("/")[2]]:
                response = await proto.fetch(url)
            statuses[response.status] += 1

    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(256)))
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    await proto.aclose()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"requests": len(urls), "cpu": cpu, "wall": wall, "statuses": dict(statuses)}))

uvloop.run(main())
"""

_FLOOR = r"""
import asyncio, json, resource, sys, time
import aiohttp, uvloop

urls = [line.strip() for line in open(sys.argv[1]) if line.strip()]

async def main():
    queue = list(reversed(urls))
    statuses = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256, limit_per_host=2)) as session:
        async def worker():
            while queue:
                url = queue.pop()
                async with session.get(url, allow_redirects=False) as resp:
                    await resp.read()
                statuses[resp.status] = statuses.get(resp.status, 0) + 1

        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(256)))
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"requests": len(urls), "cpu": cpu, "wall": wall, "statuses": statuses}))

uvloop.run(main())
"""


def url_list(port: int, web: Path) -> Path:
    crawled = WORK / "urls.txt"
    if crawled.exists() and f":{port}/" in crawled.read_text()[:200]:
        return crawled
    out = WORK / "http-path-urls.txt"
    urls = [f"http://{f.relative_to(web).parts[0]}:{port}/{'/'.join(f.relative_to(web).parts[1:])}"
            for f in sorted(web.rglob("*")) if f.is_file() and not f.name.endswith(".gz")]
    out.write_text("\n".join(urls) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--floor", action="store_true", help="also run bare aiohttp on the same URLs")
    args = parser.parse_args()
    trees = dict(spec.partition("=")[::2] for spec in args.tree)
    if not trees:  # `make bench`: this checkout against bare aiohttp
        trees, args.floor = {"checkout": str(ROOT)}, True
    if args.floor:
        trees["floor"] = ""
    WORK.mkdir(parents=True, exist_ok=True)
    web = WORK / "web"
    if not web.exists():
        generate(web, 120, 50, args.port, 7)
    results: dict[str, list[dict]] = {name: [] for name in trees}
    with Nginx(web, args.port, WORK / "nginx"):
        urls = url_list(args.port, web)
        for i in range(args.runs):
            names = list(trees)
            for name in names[i % len(names):] + names[: i % len(names)]:
                env = {**os.environ, "PYTHONPATH": str(Path(trees[name]).resolve())} if trees[name] else None
                child = _FLOOR if name == "floor" and not trees[name] else _CHILD
                out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", child, str(urls)],
                                     env=env, check=True, capture_output=True, text=True, cwd="/")
                run = json.loads(out.stdout.strip().splitlines()[-1])
                results[name].append(run)
                print(f"run {i} {name:6s} {run['requests']} requests {run['wall']:6.2f} s wall "
                      f"{run['cpu'] / run['requests'] * 1000:6.3f} CPU s per 1000 requests "
                      f"load {os.getloadavg()[0]:.1f} {run['statuses']}", flush=True)
    print("\n| tree | CPU s per 1000 requests (median) | wall s (median) |\n|---|---:|---:|")
    for name, runs in results.items():
        print(f"| {name} | {statistics.median(r['cpu'] / r['requests'] * 1000 for r in runs):.3f} | "
              f"{statistics.median(r['wall'] for r in runs):.2f} |")


if __name__ == "__main__":
    main()
