"""Cost per outlink of crawler.urls.normalize against urllib.parse.urljoin.

Run: .venv/bin/python bench/bench_normalize.py [ROUNDS]
Resolves 80 links typical of a news page against its URL, ROUNDS times (1000),
and prints microseconds per link: with the plain normalizer (no urls.* options) and with
the one the crawler builds from the default config (slashes collapsed, tracking and session
parameters dropped). urljoin only joins (no scheme check, no
normalization), so it is the floor a pure-Python resolver would start from.
"""

from __future__ import annotations

import sys
import time
from urllib.parse import urljoin

import ada_url

from crawler.config import CrawlerConfig
from crawler.urls.normalize import InvalidUrl, Normalizer, normalize

BASE = "https://www.example-news.com/world/europe/2026/11/29/story-title-here.html?utm_source=feed"

LINKS = [
    "/",
    "/world",
    "/world/europe",
    "/business",
    "/tech",
    "/science",
    "/sport",
    "/culture",
    "/opinion",
    "/about/contact",
    "/about/privacy-policy",
    "/search?q=election&page=2",
    "/world/europe/2026/11/29/another-story.html",
    "/world/asia/2026/11/28/more-news.html",
    "other-story.html",
    "./related-story.html",
    "../28/yesterday.html",
    "../../10/archive.html",
    "gallery/photo-1.jpg",
    "gallery/photo-2.jpg",
    "?page=2",
    "?utm_source=twitter&ref=share",
    "#comments",
    "#top",
    "#",
    "",
    "//cdn.example-news.com/static/app.js",
    "//static.example-news.com/css/main.css?v=1234",
    "https://www.example-news.com/live",
    "https://www.example-news.com/video/clip-99?autoplay=1",
    "https://twitter.com/intent/tweet?url=https%3a%2f%2fwww.example-news.com%2fx&text=Read%20this",
    "https://www.facebook.com/sharer/sharer.php?u=https%3A%2F%2Fwww.example-news.com%2Fx",
    "https://www.linkedin.com/shareArticle?mini=true&url=https%3A%2F%2Fexample.com",
    "http://partner.example.org/landing?campaign=fall%5f2026",
    "https://shop.example-news.com/",
    "https://subscribe.example-news.com/offer/annual#plans",
    "mailto:news@example-news.com",
    "javascript:void(0)",
    "tel:+44-20-1234-5678",
    "https://en.wikipedia.org/wiki/Caf%C3%A9",
    "https://en.wikipedia.org/wiki/Z%c3%bcrich",
    "/tag/europe",
    "/tag/politics",
    "/tag/economy",
    "/author/jane-doe",
    "/author/john-smith",
    "/world/europe/page/2",
    "/world/europe/page/3",
    "/newsletters",
    "/podcasts/daily",
    "/apps",
    "/rss/world.xml",
    "/sitemap.xml",
    "/terms-of-use",
    "/cookie-settings",
    "/accessibility",
    "/careers",
    "/advertise",
    "https://www.example-news.com/world/americas",
    "https://www.example-news.com/world/africa",
    "https://www.example-news.com/world/middle-east",
    "/world/europe/2026/11/27/older.html",
    "/world/europe/2026/11/26/older-still.html",
    "/img/logo.svg",
    "/img/icons/search.svg",
    "/search?q=caf\u00e9",
    "/weather/London",
    " /trimmed-link ",
    "/path with spaces/x.html",
    "HTTPS://WWW.EXAMPLE-NEWS.COM/UPPER",
    "https://www.example-news.com:443/explicit-port",
    "/a/b/../c/./d.html",
    "https://b\u00fccher.example/buch",
    "/live/2026-11-29#latest",
    "/video?id=123&lang=en",
    "/video?id=124&lang=fr",
    "/faq",
    "/help",
    "https://apps.apple.com/app/id123456",
    "https://play.google.com/store/apps/details?id=x",
]
assert len(LINKS) == 80, len(LINKS)


def run_normalize() -> int:
    rejected = 0  # counted rather than ignored: also keeps try/except cheaper than suppress()
    for link in LINKS:
        try:
            normalize(link, BASE)
        except InvalidUrl:
            rejected += 1
    return rejected


CONFIGURED = Normalizer.from_config(CrawlerConfig()).normalize


def run_configured() -> int:
    rejected = 0
    for link in LINKS:
        try:
            CONFIGURED(link, BASE)
        except InvalidUrl:
            rejected += 1
    return rejected


def run_urljoin() -> None:
    for link in LINKS:
        urljoin(BASE, link)


def run_ada_join() -> int:
    failed = 0
    for link in LINKS:
        try:
            ada_url.join_url(BASE, link)
        except ValueError:
            failed += 1
    return failed


def timed(fn, rounds: int) -> float:
    """Best of 3 runs, in microseconds per link."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / rounds / len(LINKS) * 1e6


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    ours = timed(run_normalize, rounds)
    configured = timed(run_configured, rounds)
    peer = timed(run_urljoin, rounds)
    ada = timed(run_ada_join, rounds)
    print(f"{len(LINKS)} links ({run_normalize()} rejected by normalize) x {rounds} rounds, best of 3")
    print(f"crawler.urls.normalize      {ours:6.2f} us/link  {ours * 80:7.1f} us/page")
    print(f"  with the default urls.*   {configured:6.2f} us/link  {configured * 80:7.1f} us/page")
    print(f"urllib.parse.urljoin        {peer:6.2f} us/link  {peer * 80:7.1f} us/page  (join only)")
    print(f"ada_url.join_url            {ada:6.2f} us/link  {ada * 80:7.1f} us/page  (join only)")
    print(f"normalize / urljoin         {ours / peer:6.2f}")
    print(f"  with the default urls.*   {configured / peer:6.2f}")


if __name__ == "__main__":
    main()
