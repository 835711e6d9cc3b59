"""What a politeness queue counts by (``fetcher.queue_mode``): host, IP address, or registered domain.

- host: every host name is its own queue (the default).
- domain: hosts under one registered domain share a queue (``a.example.co.uk``
  and ``b.example.co.uk`` -> ``example.co.uk``), found with the public suffix
  list that ``publicsuffixlist`` ships, so no download happens at run time.
- ip: hosts served from one address share a queue; the name is resolved through
  the same pins, cache and cap the HTTP protocol uses. A name that does not
  resolve queues by itself and fails as a DNS error when fetched.
"""

from __future__ import annotations

import typing

from crawler.config import CrawlerConfig
from crawler.protocols.dns import PolicyResolver, address_of
from crawler.urls.domain import registered_domain


class QueueKey(typing.Protocol):
    async def key(self, host: str) -> str: ...

    async def aclose(self) -> None: ...


class HostKey:
    def __init__(self, cfg: CrawlerConfig) -> None:
        pass

    async def key(self, host: str) -> str:
        return host

    async def aclose(self) -> None:
        pass


class DomainKey:
    def __init__(self, cfg: CrawlerConfig) -> None:
        pass

    async def key(self, host: str) -> str:
        return registered_domain(host)

    async def aclose(self) -> None:
        pass


class IpKey:
    def __init__(self, cfg: CrawlerConfig) -> None:
        self.resolver = PolicyResolver(cfg.http)

    async def key(self, host: str) -> str:
        return await address_of(self.resolver, host)

    async def aclose(self) -> None:
        await self.resolver.close()


QUEUE_KEYS: dict[str, type[HostKey] | type[DomainKey] | type[IpKey]] = {
    "host": HostKey,
    "domain": DomainKey,
    "ip": IpKey,
}


def queue_key_for(cfg: CrawlerConfig) -> QueueKey:
    return QUEUE_KEYS[cfg.fetcher.queue_mode](cfg)
