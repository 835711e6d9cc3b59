"""Time HtmlParser.parse (title + text + outlinks) on a ~30 KB page with ~80 links.

Run: .venv/bin/python bench/bench_parse.py [--iterations 300]

The peer is selectolax alone (parse + body text, no links): the ratio says what the
decoding, link resolution/normalization and text clean-up add on top of the parser.
"""

from __future__ import annotations

import argparse
import random
import time

from selectolax.lexbor import LexborHTMLParser

from crawler.parsers.html import HtmlParser

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


def per_call_ms(fn, iterations: int) -> float:
    for _ in range(min(20, iterations)):  # warm caches and the allocator
        fn()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - start) / iterations * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=300)
    args = ap.parse_args()

    page = make_page()
    parser = HtmlParser(agent_name="benchbot")
    res = parser.parse(page, PAGE_URL, "text/html; charset=utf-8")
    assert res.status == "success", res.reason
    anchors = page.count(b"<a ")

    ours = per_call_ms(lambda: parser.parse(page, PAGE_URL, "text/html; charset=utf-8"), args.iterations)
    peer = per_call_ms(lambda: LexborHTMLParser(page).body.text(separator=" "), args.iterations)
    print(
        f"page {len(page) / 1000:.1f} kB, {anchors} <a> tags, {len(res.outlinks)} outlinks kept, "
        f"text {len(res.text)} chars"
    )
    print(f"HtmlParser.parse: {ours:.3f} ms/page over {args.iterations} iterations")
    print(f"selectolax parse+text only (peer): {peer:.3f} ms/page; ratio {ours / peer:.2f}x")


if __name__ == "__main__":
    main()
