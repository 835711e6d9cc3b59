"""Fetch throughput with 1 vs 2 fetch processes, against a generated multi-host site in its own process.

Run: .venv/bin/python bench/bench_fetch.py [--hosts 64] [--pages 60] [--partitions 4]

The site server runs in a separate process and serves pre-generated ~30 KB
gzipped HTML pages with ~80 links each, under many host names pinned to
127.0.0.1 with http.resolve (each name is its own politeness queue). Each run
is `crawler fetch` on a fresh copy of one segment, with parsing on, so the
figure includes HTTP, decompression, parsing and writing. The peer of the
2-process run is the 1-process run in the same invocation: the ratio is what
matters, absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import gzip
import multiprocessing
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = ["weather", "station", "rain", "gauge", "anemometer", "barometer", "sensor", "wind", "pressure", "humidity", "data", "logger"]


def _pages(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    pages = []
    for i in range(count):
        links = "".join(f'<li><a href="/p{rng.randrange(count)}">{rng.choice(WORDS)} {j}</a></li>' for j in range(80))
        text = " ".join(rng.choice(WORDS) for _ in range(3500))
        html = f"<html><head><title>Page {i}</title></head><body><p>{text}</p><ul>{links}</ul></body></html>"
        pages.append(gzip.compress(html.encode(), 6))
    return pages


def _serve(port_queue: multiprocessing.Queue, pages: int) -> None:
    import asyncio

    from aiohttp import web

    bodies = _pages(pages)

    async def page(request: web.Request) -> web.Response:
        name = request.match_info["n"]
        index = int(name) if name.isdigit() else 0
        return web.Response(body=bodies[index % len(bodies)],
                            headers={"Content-Encoding": "gzip", "Content-Type": "text/html; charset=utf-8"})

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/p{n}", page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port_queue.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


def _segment(work: Path, hosts: int, pages: int, partitions: int, port: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from crawler.models import FETCHLIST
    from crawler.segments.layout import Segment, part_name, partition_of

    seg = Segment(work / "template" / "segments" / "20260101T000000000Z")
    seg.dir("fetchlist").mkdir(parents=True)
    rows: dict[int, list[dict]] = {p: [] for p in range(partitions)}
    for h in range(hosts):
        host = f"h{h}.bench.test"
        part = partition_of(host, partitions)
        rows[part] += [{"url": f"http://{host}:{port}/p{i}", "host": host, "partition": part, "score": 1.0,
                        "db_status": "unfetched", "retries": 0} for i in range(pages)]
    for part, entries in rows.items():
        pq.write_table(pa.Table.from_pylist(entries, schema=FETCHLIST), seg.dir("fetchlist") / part_name(part))
    seg.mark_done("fetchlist")
    return seg.path


def _run(work: Path, template: Path, processes: int, hosts: int) -> tuple[float, float]:
    run_dir = work / f"p{processes}"
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.copytree(template.parent.parent, run_dir)
    seg = run_dir / "segments" / template.name
    resolve = "{" + ", ".join(f"h{h}.bench.test: 127.0.0.1" for h in range(hosts)) + "}"
    args = [sys.executable, "-m", "crawler", "fetch", str(seg), "-D", f"crawl_dir={run_dir}",
            "-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0", "-D", "fetcher.concurrency=64",
            "-D", f"fetcher.processes={processes}", "-D", f"http.resolve={resolve}", "-D", "log.level=warning",
            "-D", "log.format=json"]
    cpu_before = _children_cpu()
    started = time.perf_counter()
    subprocess.run(args, check=True, cwd=ROOT)
    elapsed = time.perf_counter() - started
    assert (seg / "fetcher" / "_SUCCESS").exists()
    return elapsed, _children_cpu() - cpu_before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--pages", type=int, default=60, help="pages per host")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    server = context.Process(target=_serve, args=(ports, 200), daemon=True)
    server.start()
    try:
        port = ports.get(timeout=60)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            template = _segment(work, args.hosts, args.pages, args.partitions, port)
            urls = args.hosts * args.pages
            best = {}
            for processes in [1, 2] * args.repeat:
                elapsed, cpu = _run(work, template, processes, args.hosts)
                best[processes] = min(best.get(processes, elapsed), elapsed)
                print(f"processes={processes}: {urls} pages in {elapsed:.2f} s ({urls / elapsed:.0f} pages/s), "
                      f"fetcher CPU {cpu:.1f} s ({cpu / urls * 1000:.2f} ms/page)")
        print(f"best: 1 process {urls / best[1]:.0f} pages/s, 2 processes {urls / best[2]:.0f} pages/s, "
              f"ratio {best[1] / best[2]:.2f}x")
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
