"""The protocol instances one owner (a fetch, or the daemon's robots.txt cache) fetches through."""

from __future__ import annotations

from typing import Any

from crawler.config import CrawlerConfig
from crawler.plugins import Registry
from crawler.protocols.base import PROTOCOLS, Protocol, served_schemes


class ProtocolPool:
    """One instance per plugin class, so http and https share a connection pool; closed by its owner.

    The plugins of every scheme the crawl fetches (``urls.schemes``, enabled) are imported at once: a
    plugin that cannot load (a missing dependency) stops the fetch with its reason before any request,
    instead of failing every URL one by one.
    """

    def __init__(self, cfg: CrawlerConfig, registry: Registry = PROTOCOLS) -> None:
        self.cfg = cfg
        self.registry = registry
        self._by_scheme: dict[str, Protocol] = {}  # the per-request lookup
        self._by_factory: dict[Any, Protocol] = {}
        served = served_schemes(cfg)  # scheme -> '' if enabled, else why not
        for scheme in cfg.urls.schemes:
            if scheme in registry and not served.get(scheme):
                registry.load(scheme)  # raises PluginError naming the plugin and the import failure

    def protocol_for(self, url: str) -> Protocol:
        scheme = url.split(":", 1)[0].lower()
        protocol = self._by_scheme.get(scheme)
        if protocol is None:
            factory = self.registry.load(scheme)
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
