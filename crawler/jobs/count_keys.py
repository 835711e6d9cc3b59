"""What ``generate.max_per_host`` counts by (``generate.count_mode``): host, registered domain, or IP.

Each mode maps the distinct hosts of the due pages to their counting key; generate
joins that small table onto the pages, so the per-key limit stays one SQL window.
``domain`` uses the public suffix list bundled with ``publicsuffixlist`` (never
fetched over the network): ``a.example.co.uk`` and ``b.example.co.uk`` count as
``example.co.uk``. ``ip`` resolves each host once through the fetcher's resolver
(``http.resolve`` pins first; a name that does not resolve counts by itself), so
hosts sharing a server share its limit, grouped exactly as ``fetcher.queue_mode: ip``
queues them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from crawler.config import CrawlerConfig
from crawler.protocols.dns import PolicyResolver, address_of
from crawler.urls.domain import registered_domain

CountKey = Callable[[list[str], CrawlerConfig], list[str]]


def _by_host(hosts: list[str], cfg: CrawlerConfig) -> list[str]:
    return list(hosts)


def _by_domain(hosts: list[str], cfg: CrawlerConfig) -> list[str]:
    return [registered_domain(h) for h in hosts]


def _by_ip(hosts: list[str], cfg: CrawlerConfig) -> list[str]:
    # The fetcher's resolver (crawler/protocols/dns.py): http.resolve pins, the cache with its negative
    # entries and the lookup cap, so generate counts hosts by the same address ``queue_mode: ip`` queues by.
    async def keys() -> list[str]:
        resolver = PolicyResolver(cfg.http)
        try:
            return list(await asyncio.gather(*(address_of(resolver, h.strip("[]")) for h in hosts)))
        finally:
            await resolver.close()

    with ThreadPoolExecutor(max_workers=1) as pool:  # a loop of its own, whether or not the caller runs one
        return pool.submit(asyncio.run, keys()).result()


COUNT_KEYS: dict[str, CountKey] = {"host": _by_host, "domain": _by_domain, "ip": _by_ip}


def count_keys(hosts: list[str], cfg: CrawlerConfig) -> list[str]:
    """The counting key of each host, in order, for ``cfg.generate.count_mode``."""
    return COUNT_KEYS[cfg.generate.count_mode](hosts, cfg)
