"""CPU per page of writing a segment part (WARC records and the three Parquet outputs), as the fetcher does.

Run: .venv/bin/python bench/bench_write.py [--pages 1000] [--runs 5]

The pages are bench/sitegen.py's (seed 7, ~30 kB HTML); each becomes a 200
response twice, once with the body as served gzip (as nginx serves the bench
web) and once plain, parsed by ParserDispatch for its parse_text and parse_data
rows. Each part is written with ``write_part`` (what ``PartitionWriter.commit``
runs in a thread) and its pieces timed alone; figures are CPU time of this
process (``time.process_time``), the median of the runs, per record, with the
size of what was written. The memory here stays warm from run to run: the page
faults a crawl's parts pay for fresh memory (what slicing parse_text avoids) do
not show; bench/write_steps.py times the same steps inside a real crawl.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sitegen import generate  # noqa: E402

from crawler.config import CrawlerConfig  # noqa: E402
from crawler.fetcher.records import fetch_row  # noqa: E402
from crawler.models import FETCHER, PARSE_DATA, PARSE_TEXT, FetchStatus  # noqa: E402
from crawler.parsers.dispatch import ParserDispatch  # noqa: E402
from crawler.parsers.rows import parse_rows  # noqa: E402
from crawler.protocols.base import Response  # noqa: E402
from crawler.segments.warc import http_records  # noqa: E402
from crawler.segments.writer import _Pending, write_parquet, write_part  # noqa: E402

HEADERS = [("Server", "nginx/1.22.1"), ("Date", "Mon, 30 Nov 2026 03:43:45 GMT"), ("Content-Type", "text/html"),
           ("Last-Modified", "Mon, 30 Nov 2026 03:43:27 GMT"), ("Connection", "keep-alive")]
REQUEST = [("Host", "127.0.1.1:18080"), ("User-Agent", "crawler/0.1"), ("Accept-Encoding", "gzip, deflate, br")]


def batch(pages: int, gzipped: bool) -> _Pending:
    with tempfile.TemporaryDirectory() as tmp:
        urls = generate(Path(tmp), max(1, pages // 50 + 1), 50, 18080, 7)
        files = sorted(Path(tmp).glob("*/p/*.html"))[:pages]
        bodies = [(f"http://{f.parent.parent.name}:18080/p/{f.name}", f.read_bytes()) for f in files]
    assert urls
    dispatch = ParserDispatch(CrawlerConfig())
    pending = _Pending()
    for url, body in bodies:
        raw = gzip.compress(body, 6) if gzipped else body
        headers = [*HEADERS, ("Content-Length", str(len(raw)))] + ([("Content-Encoding", "gzip")] if gzipped else [])
        response = Response(url=url, status=200, reason="OK", headers=headers, raw_body=raw, body=body,
                            request_headers=REQUEST, peer_ip="127.0.1.1")
        text_row, data_row = parse_rows(url, dispatch.parse(body, url, "text/html"))
        entry = {"url": url, "host": url.split("/")[2].split(":")[0]}
        pending.fetcher.append(fetch_row(entry, FetchStatus.SUCCESS, response=response))
        pending.parse_text.append(text_row)
        pending.parse_data.append(data_row)
        pending.responses.append(response)
    return pending


def cpu_us(fn: Callable[[], object], records: int, runs: int) -> float:
    fn()  # untimed: the first Arrow conversion of a process imports pandas, if installed (~0.4 s)
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times) / records * 1e6


def report(pending: _Pending, served: str, runs: int, parquet: bool) -> None:
    n = len(pending.responses)
    entries = [({"url": r.url, "host": r.url.split("/")[2].split(":")[0]}, r) for r in pending.responses]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows: list[tuple[str, Callable[[], object], float | str | None]] = [
            (f"write_part, bodies {served}", lambda: write_part(tmp, 0, 0, pending), None),
            (f"  WARC response+request, {served}", lambda: [http_records(r) for r in pending.responses],
             sum(len(http_records(r)) for r in pending.responses[:200]) / min(n, 200)),
        ]
        if parquet:
            rows += [
                ("  parse_text Parquet", lambda: write_parquet(pending.parse_text, PARSE_TEXT, folder / "t.parquet",
                                                               slice_by="text"), "t.parquet"),
                ("  parse_data Parquet", lambda: write_parquet(pending.parse_data, PARSE_DATA, folder / "d.parquet"),
                 "d.parquet"),
                ("  fetcher Parquet", lambda: write_parquet(pending.fetcher, FETCHER, folder / "f.parquet"), "f.parquet"),
                ("fetch_row (digest apart)", lambda: [fetch_row(e, FetchStatus.SUCCESS, response=r, digest=False)
                                                      for e, r in entries], None),
            ]
        for name, fn, size in rows:
            us = cpu_us(fn, n, runs)
            if isinstance(size, str):
                size = (folder / size).stat().st_size / n
            shown = f"{size / 1000:7.2f}" if size is not None else ""
            print(f"{name:38s} {us:8.1f} {shown}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print(f"{'part (per record)':38s} {'CPU us':>8s} {'kB':>7s}")
    for gzipped in (True, False):
        report(batch(args.pages, gzipped), "gzip" if gzipped else "plain", args.runs, parquet=gzipped)


if __name__ == "__main__":
    main()
