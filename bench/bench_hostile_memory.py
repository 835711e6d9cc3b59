"""Peak RSS of a real `crawler fetch` over a fetchlist of N distinct hosts, most of them refusing connections.

Run: .venv/bin/python bench/bench_hostile_memory.py [--hosts 10000 100000 1000000] [--served 50]

bench/bench_fetch_memory.py measures the host queues alone (traced Python
allocations); this one runs the whole fetch process, with robots.txt cache, DNS
policy, redirects memory and segment writers, and reads its peak resident
memory from os.wait4. Hosts are IP literals 127.a.b.c on a port nothing listens
on, so each is refused at once (no DNS, no traffic off the machine), except
``--served`` hosts that are answered by the hostile test web's main server. The
peer of the largest size is the smallest: a ratio near 1 means memory does not
grow with the number of hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawler.models import FETCHLIST  # noqa: E402
from crawler.segments.layout import Segment, part_name  # noqa: E402
from tests.hostile.crawl import wait_with_rusage  # noqa: E402
from tests.hostile.web import hostile_web  # noqa: E402

CLOSED_PORT = 9  # discard: nothing listens on loopback, so connect is refused at once


def _host(i: int) -> str:
    i += 1 << 16  # skip 127.0.x.x, where the test web lives
    return f"127.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def write_fetchlist(root: Path, hosts: int, served: list[str]) -> Segment:
    seg = Segment(root / "segments" / "20260101T000000000Z")
    seg.dir("fetchlist").mkdir(parents=True)
    path = seg.dir("fetchlist") / part_name(0)
    with pq.ParquetWriter(path, FETCHLIST) as writer:
        for start in range(0, hosts, 100_000):
            rows = []
            for i in range(start, min(hosts, start + 100_000)):
                url = served[i % len(served)] if served and i % (hosts // len(served) or 1) == 0 \
                    else f"http://{_host(i)}:{CLOSED_PORT}/"
                host = url.split("/")[2].split(":")[0]
                rows.append({"url": url, "host": host, "partition": 0, "score": 1.0,
                             "db_status": "unfetched", "retries": 0})
            writer.write_table(pa.Table.from_pylist(rows, schema=FETCHLIST))
    seg.mark_done("fetchlist")
    return seg


async def measure(hosts: int, served: int) -> tuple[float, float]:
    async with hostile_web() as web:
        pages = [web.url("main", f"/{p}") for p in ("", "a.html", "b.html", "c.html", "d.html")][:served]
        with tempfile.TemporaryDirectory() as tmp:
            seg = write_fetchlist(Path(tmp), hosts, pages)
            args = [sys.executable, "-m", "crawler", "fetch", str(seg.path), "-D", f"crawl_dir={tmp}",
                    "-D", "log.level=warning", "-D", "log.format=json", "-D", "fetcher.min_delay=0",
                    *web.crawl_args()]
            started = time.monotonic()
            proc = subprocess.Popen(args, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)})
            code, usage = await asyncio.to_thread(wait_with_rusage, proc, 3600)
            if code != 0:
                raise SystemExit(f"fetch of {hosts} hosts exited {code}")
            return usage.ru_maxrss / 1024, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--served", type=int, default=5, help="entries answered by a real server (at most 5)")
    args = parser.parse_args()
    peaks = {}
    for hosts in args.hosts:
        rss, elapsed = asyncio.run(measure(hosts, args.served))
        peaks[hosts] = rss
        print(f"{hosts:>9} distinct hosts: peak RSS {rss:6.0f} MB, {hosts / elapsed:,.0f} entries/s, {elapsed:.0f} s")
    small, large = min(peaks), max(peaks)
    print(f"peak at {large:,} hosts / peak at {small:,} hosts: {peaks[large] / peaks[small]:.2f}x")


if __name__ == "__main__":
    main()
