"""The protocol instances one owner (a fetch, or the daemon's robots.txt cache) fetches through."""

from __future__ import annotations

from typing import Any

from crawler.config import CrawlerConfig
from crawler.protocols.base import PROTOCOLS, Protocol


class ProtocolPool:
    """One instance per plugin class, so http and https share a connection pool; closed by its owner."""

    def __init__(self, cfg: CrawlerConfig) -> None:
        self.cfg = cfg
        self._by_scheme: dict[str, Protocol] = {}  # the per-request lookup
        self._by_factory: dict[Any, Protocol] = {}

    def protocol_for(self, url: str) -> Protocol:
        scheme = url.split(":", 1)[0].lower()
        protocol = self._by_scheme.get(scheme)
        if protocol is None:
            factory = PROTOCOLS.load(scheme)
            protocol = self._by_factory.get(factory)
            if protocol is None:
                protocol = self._by_factory[factory] = factory(self.cfg)
            self._by_scheme[scheme] = protocol
        return protocol

    async def aclose(self) -> None:
        for protocol in self._by_factory.values():
            await protocol.aclose()
        self._by_scheme.clear()
        self._by_factory.clear()
