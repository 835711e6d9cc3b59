"""Time the crawl database jobs on a synthetic crawl: updatedb, generate and invertlinks, with peak RSS.

Run: .venv/bin/python bench/bench_webdb.py [--urls 10000000] [--pages 1000000] [--outlinks 20]
                                           [--memory-limit 3GB] [--dir /tmp/bench-webdb] [--keep]

Builds, with DuckDB straight to Parquet (not timed as a job):
- a webdb version of --urls pages over urls/100 hosts (a fifth of them already
  fetched), and outlinks of those fetched pages (10 each) as its links table;
- one fetched segment of --pages pages (fetcher + parse_data), each with
  --outlinks outlinks: two thirds to URLs the webdb knows, one third to new ones
  (spread over the same hosts), anchors included.

With ``--engine spark`` the jobs run on Spark (``--spark-master``, default local[2]); each
job's time then includes starting its JVM, as a ``crawler`` command's does.

Then runs each job in its own process (so its peak RSS is its own, read from
getrusage, with its CPU seconds: on a shared machine wall time says more about the
other load than about the job) as the crawler runs it: updatedb SEGMENT, generate
with top_n 1M and max_per_host 50, invertlinks SEGMENT. Prints one JSON line per
job and a Markdown table row for docs/benchmarks.md, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent

JOB = """
import json, resource, sys, time
import structlog
from crawler.config import load_config
from crawler.log import configure_logging
from crawler.segments.layout import Segment
cfg = load_config(None, json.loads(sys.argv[2]))
configure_logging(cfg.log)
log = structlog.get_logger()
job, segment = sys.argv[1], Segment(__import__("pathlib").Path(sys.argv[3]))
started = time.perf_counter()
if job == "updatedb":
    from crawler.jobs.updatedb import updatedb
    result = updatedb(cfg, [segment], log).new_urls
elif job == "generate":
    from crawler.jobs.generate import generate
    result = generate(cfg, log).selected
else:
    from crawler.jobs.invertlinks import invertlinks
    result = invertlinks(cfg, [segment], log).inlinks
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"job": job, "seconds": round(time.perf_counter() - started, 1), "rows": result,
                  "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1), "peak_rss_mb": usage.ru_maxrss // 1024}))
"""


def build(crawl: Path, urls: int, pages: int, outlinks: int, memory_limit: str) -> None:
    hosts = max(urls // 100, 1)
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET preserve_insertion_order = false")
    v = crawl / "webdb" / "v000001"
    for folder in (v / "pages", v / "links"):
        folder.mkdir(parents=True)
    # URL n lives on host n % hosts: "http://h{host}.example/p/{n}".
    con.execute(f"CREATE MACRO u(n) AS 'http://h' || (n % {hosts}) || '.example/p/' || n")
    con.execute(f"CREATE MACRO h(n) AS 'h' || (n % {hosts}) || '.example'")
    con.execute(f"""COPY (
        SELECT u(i) AS url, h(i) AS host,
               CASE WHEN i % 5 = 0 THEN 'fetched' ELSE 'unfetched' END AS status,
               CASE WHEN i % 5 = 0 THEN TIMESTAMP '2026-01-01' END::TIMESTAMP_MS AS fetch_time,
               (TIMESTAMP '2026-02-01' - INTERVAL (i % 1000) MINUTE)::TIMESTAMP_MS AS next_fetch,
               0::INTEGER AS retries, 2592000.0 AS fetch_interval, 0.1 + (hash(i) % 1000) / 100.0 AS score,
               CASE WHEN i % 5 = 0 THEN md5(i::VARCHAR) END AS digest,
               CASE WHEN i % 5 = 0 THEN 10 END::INTEGER AS num_outlinks,
               NULL::TIMESTAMP_MS AS modified_time, NULL::VARCHAR AS etag,
               CASE WHEN i % 5 = 0 THEN 200 END::INTEGER AS http_status
        FROM range({urls}) t(i) ORDER BY url
    ) TO '{v}/pages/part-00000.parquet' (FORMAT parquet, COMPRESSION zstd)""")
    con.execute(f"""COPY (
        SELECT u(i) AS from_url, u((i * 7919 + k) % {urls}) AS to_url,
               'anchor ' || k AS anchor
        FROM range(0, {urls}, 5) t(i), range(10) s(k)
    ) TO '{v}/links/part-00000.parquet' (FORMAT parquet, COMPRESSION zstd)""")
    (v / "meta.json").write_text(json.dumps({"version": 1, "merged_segments": []}))
    (crawl / "webdb" / "CURRENT").write_text("v000001\n")

    seg = crawl / "segments" / "20260201T000000000Z"
    for out in ("fetchlist", "fetcher", "parse_data"):
        (seg / out).mkdir(parents=True)
        (seg / out / "_SUCCESS").write_text("")
    # The fetched pages: every (urls // pages)-th URL, offset so some were fetched before.
    step = max(urls // pages, 1)
    fetched = f"SELECT i * {step} + 1 AS i FROM range({pages}) t(i)"
    con.execute(f"""COPY (
        SELECT u(i) AS url, h(i) AS host, 0::INTEGER AS partition,
               1.0 AS score, 'unfetched' AS db_status, 0::INTEGER AS retries, NULL::TIMESTAMP_MS AS fetch_time,
               NULL::TIMESTAMP_MS AS modified_time, NULL::VARCHAR AS etag
        FROM ({fetched})
    ) TO '{seg}/fetchlist/part-00000.parquet' (FORMAT parquet)""")
    con.execute(f"""COPY (
        SELECT u(i) AS url, h(i) AS host,
               CASE WHEN i % 50 = 1 THEN 'gone' ELSE 'success' END AS status,
               CASE WHEN i % 50 = 1 THEN 404 ELSE 200 END::INTEGER AS http_status, '' AS reason,
               TIMESTAMP '2026-02-01 01:00:00'::TIMESTAMP_MS AS fetch_time, 100::INTEGER AS elapsed_ms,
               'text/html' AS content_type, 30000::BIGINT AS content_length, false AS truncated,
               md5((i % 900000)::VARCHAR) AS digest, NULL::VARCHAR AS redirect_url,
               NULL::VARCHAR AS last_modified, NULL::VARCHAR AS etag
        FROM ({fetched})
    ) TO '{seg}/fetcher/part-00000-00000.parquet' (FORMAT parquet, COMPRESSION zstd)""")
    known = f"u((i * 104729 + k * 7) % {urls})"
    # New URLs: a space of urls/5 paths, so the segment's links also meet each other's new targets.
    new = f"'http://' || h(i + k) || '/new/' || ((i * 31 + k) % {urls // 5 or 1})"
    con.execute(f"""COPY (
        SELECT u(i) AS url, 'success' AS parse_status, 'page ' || i AS title,
               list_transform(range({outlinks}), lambda k: {{'url': CASE WHEN k % 3 = 2 THEN {new} ELSE {known} END,
                                                         'anchor': 'link ' || k}}) AS outlinks,
               MAP {{}}::MAP(VARCHAR, VARCHAR) AS metadata
        FROM ({fetched})
    ) TO '{seg}/parse_data/part-00000-00000.parquet' (FORMAT parquet, COMPRESSION zstd)""")
    con.close()


def run_job(job: str, crawl: Path, overrides: list[str]) -> dict:
    segment = crawl / "segments" / "20260201T000000000Z"
    done = subprocess.run(
        [sys.executable, "-c", JOB, job, json.dumps(overrides), str(segment)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{job} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=10_000_000)
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--outlinks", type=int, default=20)
    parser.add_argument("--memory-limit", default="3GB")
    parser.add_argument("--dir", default="/tmp/bench-webdb")
    parser.add_argument("--keep", action="store_true", help="keep the crawl folder afterwards")
    parser.add_argument("--engine", default="duckdb", choices=["duckdb", "spark"], help="jobs.engine")
    parser.add_argument("--spark-master", default="local[2]", help="spark.master with --engine spark")
    args = parser.parse_args()

    crawl = Path(args.dir)
    shutil.rmtree(crawl, ignore_errors=True)
    crawl.mkdir(parents=True)
    started = time.perf_counter()
    build(crawl, args.urls, args.pages, args.outlinks, args.memory_limit)
    print(json.dumps({"build_seconds": round(time.perf_counter() - started, 1), "urls": args.urls,
                      "pages": args.pages, "outlinks": args.pages * args.outlinks}), flush=True)
    overrides = [
        f"crawl_dir={crawl}", f"jobs.memory_limit={args.memory_limit}", f"jobs.temp_dir={crawl / 'duckdb-tmp'}",
        "generate.top_n=1000000", "generate.max_per_host=50", "linkdb.ignore_internal=false",
        "log.level=warning", "log.format=json", f"jobs.engine={args.engine}", f"spark.master={args.spark_master}",
    ]
    results = []
    for job in ("updatedb", "generate", "invertlinks"):
        results.append(run_job(job, crawl, overrides))
        print(json.dumps(results[-1]), flush=True)
    print("| URLs | fetched pages | outlinks | "
          + " | ".join(f"{r['job']} s (CPU s) / peak RSS" for r in results) + " | load average |")
    print(f"| {args.urls:,} | {args.pages:,} | {args.pages * args.outlinks:,} | "
          + " | ".join(f"{r['seconds']} s ({r['cpu_seconds']}) / {r['peak_rss_mb']:,} MB" for r in results)
          + f" | {' '.join(f'{x:.1f}' for x in os.getloadavg())} |")
    if not args.keep:
        shutil.rmtree(crawl, ignore_errors=True)


if __name__ == "__main__":
    main()
