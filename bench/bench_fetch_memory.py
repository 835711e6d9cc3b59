"""Memory of the host queues with very many distinct hosts: it should stay flat as the fetchlist grows.

Run: .venv/bin/python bench/bench_fetch_memory.py [--sizes 10000 100000 1000000]

Feeds N entries, each of a distinct host, through FetchQueues (the reader's
bounded ``put``, the dispatcher, and workers that finish each entry at once,
with min_delay 0 so idle hosts are forgotten) and reports the peak of traced
Python allocations. The peer of the largest size is the smallest: a ratio near
1 means per-host state is evicted and the reader's bound holds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.config import FetcherConfig  # noqa: E402
from crawler.fetcher.hostqueue import FetchQueues  # noqa: E402


async def _run(entries: int, workers: int = 256) -> tuple[float, int]:
    queues = FetchQueues(FetcherConfig(min_delay=0, concurrency=workers), workers, max_queued=workers * 20)

    async def feed() -> None:
        for i in range(entries):
            host = f"host{i}.example"
            await queues.put(host, {"url": f"http://{host}/", "host": host})
        queues.finish_feeding()

    async def work() -> None:
        while (item := await queues.ready.get()) is not None:
            await asyncio.sleep(0)
            queues.release(item[0])

    started = time.perf_counter()
    await asyncio.gather(feed(), queues.dispatch(), *(work() for _ in range(workers)))
    return time.perf_counter() - started, len(queues.hosts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    peaks = {}
    for size in args.sizes:
        tracemalloc.start()
        elapsed, left = asyncio.run(_run(size))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        peaks[size] = peak
        print(f"{size:>9} distinct hosts: peak {peak / 1e6:6.1f} MB traced, {size / elapsed:,.0f} entries/s, "
              f"{left} host queues left")
    smallest, largest = min(peaks), max(peaks)
    print(f"peak at {largest:,} hosts / peak at {smallest:,} hosts: {peaks[largest] / peaks[smallest]:.2f}x")


if __name__ == "__main__":
    main()
