"""Time parsing per page (median and p99) on HTML of several sizes, as the fetcher calls it.

Run: .venv/bin/python bench/bench_parse.py [--seconds 1.5]

Pages are generated (seeded, so every run parses the same bytes) at about 5, 30,
100 and 300 kB with links in proportion (~80 per 30 kB: nav, relative, absolute,
protocol-relative, javascript:/mailto:, repeats), plus the demo site's hand-written
pages. Each call is ParserDispatch.parse, which the fetcher runs per page: type
sniffing, decoding, title, text and normalized outlinks. The peer is selectolax
alone (parse + body text, no links) on the same 30 kB page: the ratio says what
decoding, link resolution/normalization and text clean-up add on top of the parser.
The last line times an undeclared windows-1252 page, where charset detection runs.

Cold mode, ``--web DIR`` (the bench web of bench/sitegen.py, e.g. bench/.work/web after a
compare.py run): every page parsed once, as a crawl parses it, in a fresh process per run;
prints the CPU time per page (process_time, so it survives a loaded machine). With
``--tree NAME=PATH`` (repeatable) the runs alternate between source trees, e.g. the tree before
a change (``git archive HEAD crawler | tar -x -C /tmp/old``) and this one, and medians are compared:

    .venv/bin/python bench/bench_parse.py --web bench/.work/web --runs 5 --tree old=/tmp/old --tree new=.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

from crawler.config import CrawlerConfig
from crawler.parsers.dispatch import ParserDispatch

ROOT = Path(__file__).resolve().parent.parent
PAGE_URL = "http://www.example.com/news/2026/11/article-123.html"
WORDS = [
    *[
        "crawler",
        "fetch",
        "segment",
        "host",
        "queue",
        "politeness",
        "robots",
        "parse",
        "outlink",
        "anchor",
        "text",
        "index",
        "score",
    ],
    *[
        "the",
        "of",
        "and",
        "a",
        "to",
        "in",
        "is",
        "that",
        "for",
        "on",
        "with",
        "as",
        "was",
        "by",
        "be",
        "this",
        "are",
        "from",
        "at",
        "or",
        "an",
        "café",
        "über",
    ],
]


def make_page(target_bytes: int = 30_000, links: int = 80, seed: int = 7) -> bytes:
    rnd = random.Random(seed)

    def words(k: int) -> str:
        return " ".join(rnd.choice(WORDS) for _ in range(k))

    hrefs = [
        lambda i: f"/news/2026/11/story-{i}.html",
        lambda i: f"../10/older-{i}.html?ref=home&amp;utm_source=x",
        lambda i: f"related-{i}.html#comments",
        lambda i: f"https://cdn{i % 3}.example.org/img/{i}.jpg",
        lambda i: f"//www.example.com/tag/{words(1)}",
        lambda i: "javascript:void(0)" if i % 2 else "mailto:desk@example.com",
        lambda i: "/",  # duplicates, as navigation repeats on real pages
    ]
    head = (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>Bench article 123</title>"
        "<meta name=description content='A page to time the parser'><meta name=robots content=index,follow>"
        "<link rel=canonical href=/news/2026/11/article-123.html><link rel=stylesheet href=/s.css>"
        "<script>window.dataLayer=[];function track(){return 1}</script><style>body{margin:0}</style></head>"
    )
    body = [
        "<body><nav><ul>",
        *(f"<li><a href='/section/{s}'>{s.title()}</a></li>" for s in ("world", "tech", "sport", "arts")),
        "</ul></nav><main>",
    ]
    size = len(head) + sum(map(len, body))
    i = 0
    while size < target_bytes:
        link = ""
        if i < links - 4:
            link = f" <a href='{hrefs[i % len(hrefs)](i)}' class=ref><span>{words(3)}</span></a>"
        para = (
            f"<div class=block><h3>{words(4)}</h3><p>{words(30)}<b>{words(2)}</b>{link}, {words(20)}</p>"
            f"<!-- ad slot {i} --><script>track({i})</script></div>\n"
        )
        body.append(para)
        size += len(para)
        i += 1
    body.append("</main><footer>")
    body.extend(f"<a href='{hrefs[j % len(hrefs)](j)}'>{words(2)}</a> " for j in range(i, links - 4))
    body.append("&copy; Example &nbsp; 2026</footer></body></html>")
    return (head + "".join(body)).encode("utf-8")


def time_calls(fn, seconds: float, min_calls: int = 50) -> list[float]:
    """Per-call wall times in ms, after a warm-up (caches, allocator)."""
    for _ in range(20):
        fn()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < min_calls or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def summary(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def cold_once(web: Path) -> dict:
    """Parse every page of the web once; CPU microseconds per page."""
    pages = []
    for path in sorted(web.rglob("*.html")):
        host, *rest = path.relative_to(web).parts
        pages.append((path.read_bytes(), f"http://{host}:18080/{'/'.join(rest)}"))
    dispatch = ParserDispatch(CrawlerConfig())
    start = time.process_time()
    for body, url in pages:
        dispatch.parse(body, url, "text/html")  # as nginx serves them: no charset in the header
    cpu = time.process_time() - start
    return {"pages": len(pages), "us_per_page": cpu / len(pages) * 1e6}


def cold(web: Path, runs: int, trees: list[str]) -> None:
    """Alternate fresh processes over the trees; print each tree's median CPU per page."""
    named = [t.split("=", 1) if "=" in t else ["this", t] for t in trees] or [["this", ""]]
    results: dict[str, list[float]] = {name: [] for name, _ in named}
    pages = 0
    for _ in range(runs):
        for name, tree in named:
            env = dict(os.environ)
            if tree:
                env["PYTHONPATH"] = str(Path(tree).resolve())
            out = subprocess.run(
                [sys.executable, __file__, "--web", str(web), "--once"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            run = json.loads(out)
            pages = run["pages"]
            results[name].append(run["us_per_page"])
    print(f"cold parse of {pages} pages, {runs} runs per tree, load average {os.getloadavg()[0]:.2f}")
    first = statistics.median(results[named[0][0]])
    for name, times in results.items():
        median = statistics.median(times)
        runs_text = " ".join(f"{t:.0f}" for t in times)
        print(
            f"{name:<8} {median:7.1f} us CPU per page (runs: {runs_text}), {median / first:.2f}x {named[0][0]}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.5, help="time spent per page size")
    ap.add_argument("--web", type=Path, help="cold mode: parse each page of this bench web once")
    ap.add_argument("--runs", type=int, default=5, help="cold mode: fresh processes per tree")
    ap.add_argument(
        "--tree", action="append", default=[], help="cold mode: NAME=PATH of a source tree to time"
    )
    ap.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.web is not None:
        if args.once:
            print(json.dumps(cold_once(args.web)))
        else:
            cold(args.web, args.runs, args.tree)
        return

    dispatch = ParserDispatch(CrawlerConfig())
    ctype = "text/html; charset=utf-8"
    print(f"{'page':<26} {'outlinks':>8} {'median ms':>10} {'p99 ms':>8} {'MB/s':>7}")
    for size, links in ((5_000, 15), (30_000, 80), (100_000, 250), (300_000, 600)):
        page = make_page(size, links)
        res = dispatch.parse(page, PAGE_URL, ctype)
        assert res.status == "success" and res.text, res.reason
        median, p99 = summary(
            time_calls(lambda page=page: dispatch.parse(page, PAGE_URL, ctype), args.seconds)
        )
        label = f"generated {len(page) / 1000:.0f} kB"
        print(
            f"{label:<26} {len(res.outlinks):>8} {median:>10.3f} {p99:>8.3f} {len(page) / median / 1000:>7.1f}"
        )

    demo = [
        (p.read_bytes(), "http://127.0.0.1/" + str(p.relative_to(ROOT / "examples/site")))
        for p in sorted((ROOT / "examples/site").rglob("*.html"))
    ]
    demo_times = time_calls(lambda: [dispatch.parse(b, u, ctype) for b, u in demo], args.seconds)
    median, p99 = summary([t / len(demo) for t in demo_times])
    avg_kb = sum(len(b) for b, _ in demo) / len(demo) / 1000
    print(f"{f'demo site ({len(demo)} pages, {avg_kb:.1f} kB)':<26} {'':>8} {median:>10.3f} {p99:>8.3f}")

    page = make_page()
    ours, _ = summary(time_calls(lambda: dispatch.parse(page, PAGE_URL, ctype), args.seconds))
    peer, _ = summary(time_calls(lambda: LexborHTMLParser(page).body.text(separator=" "), args.seconds))
    print(f"selectolax parse+text only (peer), 30 kB: {peer:.3f} ms median; ours/peer {ours / peer:.2f}x")

    legacy = make_page().decode("utf-8").replace("<meta charset=utf-8>", "").encode("cp1252", "replace")
    res = dispatch.parse(legacy, PAGE_URL, "text/html")
    median, p99 = summary(time_calls(lambda: dispatch.parse(legacy, PAGE_URL, "text/html"), args.seconds))
    print(
        f"undeclared windows-1252 30 kB (detected as {res.metadata['charset']}): {median:.3f} ms median, {p99:.3f} p99"
    )


if __name__ == "__main__":
    main()
