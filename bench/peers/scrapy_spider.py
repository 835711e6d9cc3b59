"""Scrapy, configured as a fair peer: robots obeyed, 2 requests per host, no delay, asyncio reactor
on uvloop, extracting title, text and links from every page and writing them out as JSON lines."""

from __future__ import annotations

import sys
import time

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor


class BenchSpider(scrapy.Spider):
    name = "bench"

    def __init__(self, seeds: list[str], allowed: list[str] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.start_urls = seeds
        if allowed:  # realsites.py: the pages link to the real web; Scrapy drops other hosts unresolved
            self.allowed_domains = allowed
        self.links = LinkExtractor()

    def parse(self, response):
        if not isinstance(response, scrapy.http.HtmlResponse):
            return
        links = self.links.extract_links(response)
        yield {
            "url": response.url,
            "t": time.time(),
            "title": response.css("title::text").get(),
            "text": " ".join(response.xpath("//body//text()[not(ancestor::script)]").getall()),
            "outlinks": [{"url": link.url, "anchor": link.text} for link in links],
        }
        for link in links:
            yield response.follow(link.url, callback=self.parse)


if __name__ == "__main__":
    seeds_file, out, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # Optional: a download delay and requests per domain (bench/manyhosts.py's polite web); else compare.py's.
    delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0
    per_domain = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    # Optional: allowed domains, comma-separated (bench/realsites.py: the pages link to the real web).
    allowed = sys.argv[6].split(",") if len(sys.argv) > 6 else None
    with open(seeds_file) as fh:
        seeds = [line.strip() for line in fh if line.strip()]
    process = CrawlerProcess(
        settings={
            "ROBOTSTXT_OBEY": True,
            "CONCURRENT_REQUESTS": concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": per_domain,
            "DOWNLOAD_DELAY": delay,
            "DOWNLOAD_DELAY_JITTER": 0,  # the delay as a floor, as the crawler's min_delay
            "AUTOTHROTTLE_ENABLED": False,
            "COOKIES_ENABLED": False,
            "TELNETCONSOLE_ENABLED": False,
            "LOG_LEVEL": "WARNING",
            "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
            "ASYNCIO_EVENT_LOOP": "uvloop.Loop",
            "FEEDS": {out: {"format": "jsonlines"}},
            "RETRY_ENABLED": False,
            "REACTOR_THREADPOOL_MAXSIZE": 20,
        }
    )
    process.crawl(BenchSpider, seeds=seeds, allowed=allowed)
    process.start()
