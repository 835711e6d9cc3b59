"""The SOCKS connector that keeps the address guard (``http.proxy`` socks5:// and socks5h://).

Imported only when a SOCKS proxy is configured: aiohttp-socks and python-socks are ~15 ms of every
fetch process's start-up otherwise.
"""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp_socks
from aiohttp_socks.connector import _ResponseHandler
from python_socks.async_.asyncio.v2 import Proxy
from yarl import URL

from crawler.protocols.proxy import _is_ip

# What aiohttp-socks raises for a proxy that refuses, fails or times out.
ERRORS = (aiohttp_socks.ProxyError, aiohttp_socks.ProxyConnectionError, aiohttp_socks.ProxyTimeoutError)


class SocksConnector(aiohttp_socks.ProxyConnector):
    """aiohttp-socks' connector, asking the proxy for the address our resolver approved (``socks5``).

    The TLS layer is started on the tunnel with the URL's host name, so SNI and the certificate check
    use the name whichever address the tunnel reaches.
    """

    def __init__(self, proxy: URL, resolver: Any, **kwargs: Any) -> None:
        self.remote_dns = proxy.scheme == "socks5h"
        self.policy_resolver = resolver
        super().__init__(
            host=proxy.host or "", port=proxy.port or 1080, proxy_type=aiohttp_socks.ProxyType.SOCKS5,
            username=proxy.user, password=proxy.password, rdns=self.remote_dns, **kwargs,
        )

    async def _connect_via_proxy(self, host: str, port: int, ssl: ssl.SSLContext | None = None,
                                 timeout: float | None = None) -> tuple[Any, Any]:
        dest = host
        if not self.remote_dns:
            dest = (await self.policy_resolver.resolve(host, port, 0))[0]["host"]
        proxy_host = self._proxy_host
        if not _is_ip(proxy_host):  # through our pins and cache too (python-socks would ask the system)
            proxy_host = (await self.policy_resolver.resolve(proxy_host, self._proxy_port, 0))[0]["host"]
        proxy = Proxy(proxy_type=self._proxy_type, host=proxy_host, port=self._proxy_port,
                      username=self._proxy_username, password=self._proxy_password, rdns=self.remote_dns)
        stream = await proxy.connect(dest_host=dest, dest_port=port, timeout=timeout)
        if ssl is not None:
            stream = await stream.start_tls(hostname=host, ssl_context=ssl)
        transport = stream.writer.transport
        protocol = _ResponseHandler(loop=self._loop, writer=stream.writer)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        return transport, protocol
