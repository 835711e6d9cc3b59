"""CPU per WARC record pair (``http_records``) and per gzip page decoded (``Decoder``), on a real crawl's mix.

Run: .venv/bin/python bench/bench_records.py [--tree DIR] [--runs 5]
     (after a compare.py run: it reads that crawl's WARC files and the bench web's .html.gz pages)

The responses are rebuilt from the WARC files of one bench crawl (bench/compare.py
leaves them under bench/.work/crawl-crawler-0; ``--warc`` names others), so the
mix is the crawl's own: ~6,100 gzip-served 200 pages, ~12,300 small 404s and
301s. ``http_records`` runs over all of them; ``Decoder`` decodes every
.html.gz file of the bench web, fed whole (the size nginx sends it in one go).
``--tree DIR`` imports the crawler package from source tree DIR, so two trees
can be compared by alternating runs. Figures are CPU time of this process
(``time.process_time``), the median of the runs.
"""

from __future__ import annotations

import argparse
import glob
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def load_responses(paths: list[str]) -> list[object]:
    from warcio.archiveiterator import ArchiveIterator

    from crawler.protocols.base import Response

    requests: dict[str, list[tuple[str, str]]] = {}
    pending = []
    for path in paths:
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                headers = record.rec_headers
                if record.rec_type == "request":
                    requests[headers.get_header("WARC-Concurrent-To")] = record.http_headers.headers
                elif record.rec_type == "response":
                    http = record.http_headers
                    status, _, reason = http.statusline.partition(" ")
                    raw = record.raw_stream.read()
                    pending.append((headers.get_header("WARC-Record-ID"), Response(
                        url=headers.get_header("WARC-Target-URI"), status=int(status), reason=reason,
                        headers=list(http.headers), raw_body=raw, body=raw,
                        truncated=headers.get_header("WARC-Truncated") is not None,
                        http_version=http.protocol.split("/", 1)[1],
                        peer_ip=headers.get_header("WARC-IP-Address"))))
    for record_id, response in pending:
        response.request_headers = requests.get(record_id, [])
    return [response for _, response in pending]


def cpu_us(fn: Callable[[], object], items: int, runs: int) -> float:
    fn()  # untimed warm-up
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times) / items * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", help="import the crawler package from this source tree")
    parser.add_argument("--warc", default=str(BENCH / ".work/crawl-crawler-0/segments/*/content/*.warc.gz"))
    parser.add_argument("--web", default=str(BENCH / ".work/web"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.tree).resolve() if args.tree else BENCH.parent))

    from crawler.protocols.decoding import Decoder
    from crawler.segments.warc import http_records

    responses = load_responses(sorted(glob.glob(args.warc)))
    if not responses:
        sys.exit(f"no WARC responses under {args.warc}: run bench/compare.py first, or pass --warc")
    pages = [r for r in responses if r.header("Content-Encoding")]
    small = [r for r in responses if not r.header("Content-Encoding")]
    gz = [p.read_bytes() for p in sorted(Path(args.web).glob("*/p/*.html.gz"))]

    def decode_all() -> None:
        for data in gz:
            decoder = Decoder("gzip", 10 * 1024 * 1024)
            decoder.feed(data)
            decoder.finish()

    rows = [
        (f"http_records, crawl mix ({len(responses)} responses)", lambda: [http_records(r) for r in responses],
         len(responses)),
        (f"  gzip-served pages ({len(pages)})", lambda: [http_records(r) for r in pages], len(pages)),
        (f"  plain small: 404, 301 ({len(small)})", lambda: [http_records(r) for r in small], len(small)),
        (f"Decoder gzip page ({len(gz)} pages)", decode_all, len(gz)),
    ]
    print(f"tree {args.tree or BENCH.parent}")
    for name, fn, n in rows:
        if n:
            print(f"{name:48s} {cpu_us(fn, n, args.runs):8.2f} us CPU each")


if __name__ == "__main__":
    main()
