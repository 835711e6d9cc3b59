"""Time the SimHash of a page's text (crawler/jobs/traps.py), against parsing the same page.

Run: .venv/bin/python bench/bench_simhash.py [--seconds 1.5]

The texts are what the HTML parser gives for bench_parse.py's generated pages (about
5, 30, 100 and 300 kB of HTML). updatedb computes one SimHash per fetched page from
parse_text; the parse itself is the fetcher's hot path, timed here for scale. The
last line times the same signature done in DuckDB SQL (3-word shingles, a
bit vote per bit) on the 30 kB text: why it is not done in SQL.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_parse import make_page, summary, time_calls  # noqa: E402

from crawler.config import CrawlerConfig  # noqa: E402
from crawler.jobs.traps import simhash  # noqa: E402
from crawler.parsers.dispatch import ParserDispatch  # noqa: E402


def sql_simhash_us(text: str, calls: int = 20) -> float:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT ?::VARCHAR AS text", [text])
    bits = " + ".join(
        f"CASE WHEN sum(((h >> {b}) & 1)::INTEGER) * 2 > count(*) THEN {1 << b}::UBIGINT ELSE 0::UBIGINT END"
        for b in range(64))
    query = f"""SELECT ({bits}) FROM (SELECT unnest(list_transform(range(1, greatest(len(w) - 1, 1)),
        lambda i: hash(w[i], w[i + 1], w[i + 2]))) AS h FROM (SELECT string_split(text, ' ') AS w FROM t) a) b"""
    start = time.perf_counter()
    for _ in range(calls):
        con.execute(query).fetchall()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.5)
    args = ap.parse_args()
    dispatch = ParserDispatch(CrawlerConfig())
    print(f"{'html':>8} {'text':>8} {'parse us':>9} {'simhash us':>11} {'p99':>6}")
    text30 = ""
    url = "http://bench.example/dir/page.html"
    for size in (5_000, 30_000, 100_000, 300_000):
        body = make_page(size, links=max(10, size * 80 // 30_000))
        result = dispatch.parse(body, url, "text/html")
        text = result.text
        if size == 30_000:
            text30 = text
        parse_ms, _ = summary(time_calls(lambda b=body, u=url: dispatch.parse(b, u, "text/html"), args.seconds))
        median, p99 = summary(time_calls(lambda t=text: simhash(t), args.seconds))  # ms
        print(f"{len(body):>8} {len(text):>8} {parse_ms * 1000:>9.0f} {median * 1000:>11.0f} {p99 * 1000:>6.0f}")
    print(f"DuckDB SQL SimHash of the 30 kB page's text: {sql_simhash_us(text30):.0f} us")


if __name__ == "__main__":
    main()
