"""Run ``crawler crawl`` as a real process against the hostile web and keep what a test needs to judge it.

The crawl runs in its own process so its peak memory (``ru_maxrss`` from
``os.wait4``) is the crawler's alone, not the test servers'. Shared by the
hostile tests and bench/bench_hostile_memory.py.
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tests.hostile.web import HostileWeb, hostile_web

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class CrawlRun:
    web: HostileWeb
    crawl_dir: Path
    code: int
    elapsed: float  # seconds, wall clock
    max_rss_mb: float  # peak resident memory of the crawl process
    stdout: str
    stderr: str

    def rows(self, output: str, columns: str = "*") -> list[dict]:
        """Every row of one segment output over all segments, as dicts."""
        glob = str(self.crawl_dir / "segments" / "*" / output / "*.parquet")
        cur = duckdb.connect().execute(f"SELECT {columns} FROM read_parquet('{glob}', union_by_name = true)")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def wait_with_rusage(proc: subprocess.Popen, timeout: float) -> tuple[int, resource.struct_rusage]:
    """Wait for ``proc`` (killing it past ``timeout``) and return its exit code and resource usage."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.05)


async def crawl_hostile(crawl_dir: Path, extra: list[str], rounds: int, timeout: float) -> CrawlRun:
    """Start the hostile web, crawl it from its root page, and return the run (servers stopped)."""
    async with hostile_web() as web:
        crawl_dir.mkdir(parents=True, exist_ok=True)
        seeds = crawl_dir / "seeds.txt"
        seeds.write_text(web.seed + "\n", encoding="utf-8")
        out, err = crawl_dir / "crawl.out", crawl_dir / "crawl.err"
        args = [sys.executable, "-m", "crawler", "crawl", "--seeds", str(seeds), "--rounds", str(rounds),
                "-D", f"crawl_dir={crawl_dir}", "-D", "log.format=json", *web.crawl_args(), *extra]
        started = time.monotonic()
        with open(out, "wb") as fout, open(err, "wb") as ferr:
            # cwd is the crawl dir: no config.yaml there, so the crawl runs on the built-in defaults.
            proc = subprocess.Popen(args, cwd=crawl_dir, stdout=fout, stderr=ferr,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)})
            code, usage = await asyncio.to_thread(wait_with_rusage, proc, timeout)
        elapsed = time.monotonic() - started
    return CrawlRun(web, crawl_dir, code, elapsed, usage.ru_maxrss / 1024, out.read_text(), err.read_text())
