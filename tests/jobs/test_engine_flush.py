"""flush_databases: what a finished job freed goes back to the system at once, and the database keeps its settings."""

from __future__ import annotations

from pathlib import Path

from crawler.config import CrawlerConfig
from crawler.jobs.engine import connect, flush_databases


def _rss_mb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


def test_a_jobs_freed_memory_goes_back_and_the_threads_stay():
    jobs = CrawlerConfig(jobs={"threads": 2}).jobs
    con = connect(jobs)
    before = _rss_mb()
    # A sort of ~200 MB of rows: its memory is freed as the cursor closes, but stays resident (DuckDB's
    # jemalloc returns it over about a second).
    con.execute("CREATE TEMP TABLE t AS SELECT range AS i, repeat('x', 100) AS s FROM range(1500000)")
    assert con.execute("SELECT count(*) FROM (SELECT s, i FROM t ORDER BY s DESC, i)").fetchone()[0] == 1_500_000
    con.close()
    grown = _rss_mb() - before
    assert grown > 100
    flush_databases()
    assert _rss_mb() - before < grown / 2
    again = connect(jobs)
    assert again.execute("SELECT current_setting('threads')").fetchone()[0] == 2
    assert again.execute("SELECT 41 + 1").fetchone()[0] == 42
    again.close()
