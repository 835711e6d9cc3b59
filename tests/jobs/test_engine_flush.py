"""flush_databases: what a finished job freed goes back to the system at once, and the database keeps its settings.

Measured in a fresh interpreter: in the test process, memory earlier tests' databases left to DuckDB's
allocator would take the sort below without the resident set growing, and decay meanwhile.
"""

from __future__ import annotations

import json
import subprocess
import sys

_CHECK = """
import json
from pathlib import Path
from crawler.config import CrawlerConfig
from crawler.jobs.engine import connect, flush_databases

def rss_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024

jobs = CrawlerConfig(jobs={"threads": 2}).jobs
con = connect(jobs)
before = rss_mb()
# A sort of ~200 MB of rows: its memory is freed as the cursor closes, but stays resident (DuckDB's
# jemalloc returns it over about a second).
con.execute("CREATE TEMP TABLE t AS SELECT range AS i, repeat('x', 100) AS s FROM range(1500000)")
rows = con.execute("SELECT count(*) FROM (SELECT s, i FROM t ORDER BY s DESC, i)").fetchone()[0]
con.close()
grown = rss_mb() - before
flush_databases()
left = rss_mb() - before
again = connect(jobs)
threads = again.execute("SELECT current_setting('threads')").fetchone()[0]
answer = again.execute("SELECT 41 + 1").fetchone()[0]
again.close()
print(json.dumps({"rows": rows, "grown": grown, "left": left, "threads": threads, "answer": answer}))
"""


def test_a_jobs_freed_memory_goes_back_and_the_threads_stay():
    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, check=True).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["rows"] == 1_500_000
    assert seen["grown"] > 100
    assert seen["left"] < seen["grown"] / 2
    assert (seen["threads"], seen["answer"]) == (2, 42)
