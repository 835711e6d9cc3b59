"""The protocol pool loads the plugins of the crawl's schemes up front, so a broken one stops the fetch once."""

from __future__ import annotations

import pytest

from crawler.config import load_config
from crawler.errors import PluginError
from crawler.plugins import Registry
from crawler.protocols.pool import ProtocolPool


class TestPreload:
    def test_a_plugin_that_cannot_load_stops_before_any_request(self):
        """A scheme the crawl fetches whose plugin fails to import raises at once, naming plugin and cause."""
        broken = Registry("crawler.protocols", {"http": "crawler.protocols.no_such_module:Http",
                                                "https": "crawler.protocols.http:HttpProtocol"})
        with pytest.raises(PluginError, match=r"plugin 'http': cannot load crawler\.protocols\.no_such_module"):
            ProtocolPool(load_config(None, []), registry=broken)

    async def test_a_disabled_schemes_plugin_is_not_loaded(self):
        """file: is not fetched unless enabled, so its plugin failing to load does not matter."""
        registry = Registry("crawler.protocols", {"http": "crawler.protocols.http:HttpProtocol",
                                                  "https": "crawler.protocols.http:HttpProtocol",
                                                  "file": "crawler.protocols.no_such_module:File"})
        pool = ProtocolPool(load_config(None, ["urls.schemes=[http, https, file]"]), registry=registry)
        try:
            assert type(pool.protocol_for("http://127.0.0.1/")).__name__ == "HttpProtocol"
        finally:
            await pool.aclose()
