"""CPU per request of the fetcher's own work (robots, queues, redirects, rows), A/B of source trees.

Run: .venv-bench/bin/python bench/bench_fetch_path.py --tree old=DIR1 --tree new=DIR2 [--runs 5] [--round 4]
(without --tree: this checkout alone)

The same generated web as bench/compare.py (sitegen, 120 hosts x 50 pages, nginx
on 127.0.1.N; reused if compare.py made it). Once per work folder, one ``crawler
crawl`` of the web (this checkout) leaves its segments and webdb behind. Each run
is a fresh process that imports the tree's ``crawler`` and fetches a copy of one
round's fetchlist (``--round 4``, the default, is the crawl's last: only 404s and
``/moved/`` redirects whose targets the webdb has as fetched and not due, 5,306
entries; ``--round 3`` adds 3,000 pages, their parsing and robots-denied URLs),
configured as compare.py's crawl (256 workers, 2 per host, no delay, parsing on,
every output written), three times:

1. ``Fetcher.run`` over HTTP, inside ``fetch_gc``;
2. every URL that fetch requested (its robots.txt files too) through
   ``HttpProtocol.fetch`` alone (256 workers, 2 per host, nothing else): the HTTP
   path's own cost on the same requests; the answers are kept;
3. ``Fetcher.run`` again on a fresh copy, its protocol replaced by one that hands
   back pass 2's answers after one turn of the loop: the fetcher without HTTP
   (robots, host queues, redirects, rows, logging, part writing), so its own
   cost is measured directly rather than as a difference of two noisy figures.

Reported per 1000 requests, from getrusage (the process: loop and part-writer
threads) and ``time.thread_time`` (the loop's thread alone): pass 1, pass 2,
pass 1 - pass 2, and pass 3. Runs alternate between the trees; medians are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crawlargs import crawl_settings  # noqa: E402
from nginx import Nginx  # noqa: E402
from sitegen import generate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("BENCH_WORK", ROOT / "bench" / ".work"))
PYTHON = ROOT / ".venv" / "bin" / "python"
CRAWL_ARGS = crawl_settings()

_CHILD = r"""
import asyncio, json, resource, shutil, sys, time
from collections import defaultdict
from pathlib import Path
import pyarrow as pa
import pyarrow.parquet as pq
import uvloop
from crawler.config import load_config
from crawler.fetcher.runner import fetch_gc
from crawler.fetcher.service import Fetcher
from crawler.log import configure_logging, get_logger
from crawler.protocols.http import HttpProtocol
from crawler.segments.layout import Segment

crawl_dir, fetchlist, work, config_path, *overrides = sys.argv[1:]
cfg = load_config(Path(config_path), [f"crawl_dir={crawl_dir}", *overrides])
configure_logging(cfg.log)
pa.Table.from_pylist([{"a": 1}])  # pyarrow's one-off import of pandas: a crawl pays it before its fetches

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

def segment(name):
    path = Path(work) / name
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(fetchlist, path / "fetchlist")
    return Segment(path)

class Replay:
    # The answers the HTTP pass got, handed back after one turn of the loop: the fetcher without HTTP.
    def __init__(self, answers):
        self.answers = answers

    async def fetch(self, url, extra_headers=None, *, limit=None):
        await asyncio.sleep(0)
        return self.answers[url]

    async def aclose(self):
        pass

async def fetch(seg, protocol=None):
    fetcher = Fetcher(cfg, seg, get_logger(command="bench"))
    if protocol is not None:
        fetcher.protocol_for = fetcher.robots.protocol_for = lambda url: protocol
    before, loop_before, start = cpu(), time.thread_time(), time.monotonic()
    report = await fetcher.run()
    return report, cpu() - before, time.thread_time() - loop_before, time.monotonic() - start

async def http_only(urls):
    proto = HttpProtocol(cfg)
    hosts = defaultdict(lambda: asyncio.Semaphore(2))
    queue = list(reversed(urls))
    answers = {}

    async def worker():
        while queue:
            url = queue.pop()
            async with hosts[url.split("/")[2]]:
                answers[url] = await proto.fetch(url)

    before = cpu()
    await asyncio.gather(*(worker() for _ in range(256)))
    spent = cpu() - before
    await proto.aclose()
    return spent, answers

with fetch_gc():
    seg = segment("http")
    report, fetch_cpu, loop_cpu, wall = uvloop.run(fetch(seg))
rows = pq.ParquetDataset(sorted(seg.dir("fetcher").glob("part-*.parquet"))).read(
    columns=["url", "http_status"]).to_pylist()
requested = [r["url"] for r in rows if r["http_status"] is not None]
origins = sorted({"/".join(u.split("/")[:3]) for u in (r["url"] for r in rows)})
urls = requested + [o + "/robots.txt" for o in origins]
http_cpu, answers = uvloop.run(http_only(urls))
with fetch_gc():
    replayed, replay_cpu, replay_loop, _ = uvloop.run(fetch(segment("replay"), Replay(answers)))
assert replayed.by_status == report.by_status, (replayed.by_status, report.by_status)
print(json.dumps({"rows": len(rows), "requests": len(urls), "by_status": report.by_status, "fetch_cpu": fetch_cpu,
                  "loop_cpu": loop_cpu, "http_cpu": http_cpu, "wall": wall, "replay_cpu": replay_cpu,
                  "replay_loop": replay_loop}))
"""


def reference_crawl(port: int) -> Path:
    """The crawl whose fetchlists and webdb every run reuses (made once per work folder)."""
    crawl = WORK / "fetch-path-crawl"
    if (crawl / "done").exists():
        return crawl
    shutil.rmtree(crawl, ignore_errors=True)
    seeds = WORK / "fetch-path-seeds.txt"
    web = WORK / "web"
    # compare.py's web, if it made one (same seed): regenerating it could pull it from under its nginx.
    hosts = sorted(d.name for d in web.iterdir()) if web.exists() else None
    urls = [f"http://{h}:{port}/" for h in hosts] if hosts else generate(web, 120, 50, port, 7)
    seeds.write_text("\n".join(urls) + "\n")
    with Nginx(WORK / "web", port, WORK / "nginx"):
        subprocess.run([str(ROOT / ".venv" / "bin" / "crawler"), "crawl", "--seeds", str(seeds), "--rounds", "30",
                        "-D", f"crawl_dir={crawl}", *CRAWL_ARGS], check=True, cwd=ROOT)
    (crawl / "done").write_text("")
    return crawl


def round_fetchlist(crawl: Path, round_: int) -> Path:
    return sorted((crawl / "segments").iterdir())[round_ - 1] / "fetchlist"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--round", type=int, default=4, help="which round's fetchlist of the reference crawl")
    parser.add_argument("--port", type=int, default=18080)
    args = parser.parse_args()
    trees = dict(spec.partition("=")[::2] for spec in args.tree) or {"checkout": str(ROOT)}
    WORK.mkdir(parents=True, exist_ok=True)
    crawl = reference_crawl(args.port)
    results: dict[str, list[dict]] = {name: [] for name in trees}
    with Nginx(WORK / "web", args.port, WORK / "nginx"):
        for i in range(args.runs):
            names = list(trees)
            for name in names[i % len(names):] + names[: i % len(names)]:
                tree = Path(trees[name]).resolve()
                work = WORK / "fetch-path-runs" / name
                out = subprocess.run([str(PYTHON), "-c", _CHILD, str(crawl), str(round_fetchlist(crawl, args.round)),
                                      str(work), str(tree / "config.yaml"), *CRAWL_ARGS[1::2]],
                                     env={**os.environ, "PYTHONPATH": str(tree)},
                                     check=True, capture_output=True, text=True, cwd="/")
                shutil.rmtree(work, ignore_errors=True)
                run = json.loads(out.stdout.strip().splitlines()[-1])
                results[name].append(run)
                per = 1000 / run["requests"]
                print(f"run {i} {name:8s} {run['rows']} rows {run['requests']} requests {run['wall']:5.2f} s wall; "
                      f"CPU s per 1000 requests: fetch {run['fetch_cpu'] * per:.3f} (loop "
                      f"{run['loop_cpu'] * per:.3f}), HTTP only {run['http_cpu'] * per:.3f}, replayed "
                      f"{run['replay_cpu'] * per:.3f} (loop {run['replay_loop'] * per:.3f}), "
                      f"load {os.getloadavg()[0]:.1f} {run['by_status']}", flush=True)
    print("\n| tree | fetch | loop thread | HTTP only | fetch - HTTP | replayed | replayed, loop thread |\n"
          "|---|---:|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        def med(key: str, runs: list[dict] = runs) -> float:
            return statistics.median(r[key] / r["requests"] * 1000 for r in runs)
        own = statistics.median((r["fetch_cpu"] - r["http_cpu"]) / r["requests"] * 1000 for r in runs)
        print(f"| {name} | {med('fetch_cpu'):.3f} | {med('loop_cpu'):.3f} | {med('http_cpu'):.3f} | {own:.3f} | "
              f"{med('replay_cpu'):.3f} | {med('replay_loop'):.3f} |")
    print("(CPU s per 1000 requests, medians)")


if __name__ == "__main__":
    main()
