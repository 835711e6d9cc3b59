"""The HTTP protocol against real loopback servers: address policy, pinned names, limits, errors."""

from __future__ import annotations

import gzip
import ssl

import aiohttp
import pytest
from aiohttp import web

from crawler.config import load_config
from crawler.errors import BlockedAddress, ConnectError, DnsError
from crawler.protocols.http import HttpProtocol, _fetch_error
from tests.conftest import serve_app


@pytest.fixture
async def server():
    async def page(request):
        return web.Response(text="<html><title>t</title>hello</html>", content_type="text/html")

    async def bomb(request):
        return web.Response(body=gzip.compress(b"a" * 20_000_000), headers={"Content-Encoding": "gzip"})

    async def redirect(request):
        return web.Response(status=301, headers={"Location": "/page"})

    app = web.Application()
    app.router.add_get("/page", page)
    app.router.add_get("/bomb", bomb)
    app.router.add_get("/redirect", redirect)
    async with serve_app(app) as port:
        yield port


async def _fetch(url: str, *overrides: str):
    protocol = HttpProtocol(load_config(None, list(overrides)))
    try:
        return await protocol.fetch(url)
    finally:
        await protocol.aclose()


class TestAddressPolicy:
    async def test_loopback_refused_by_default(self, server):
        """A loopback IP literal is refused unless http.allow_private_networks is true."""
        with pytest.raises(BlockedAddress):
            await _fetch(f"http://127.0.0.1:{server}/page")

    async def test_pinned_name_resolving_to_loopback_refused_by_default(self, server):
        """A name pinned by http.resolve to a private address is refused after resolution."""
        with pytest.raises(BlockedAddress):
            await _fetch(f"http://site.test:{server}/page", "http.resolve={site.test: 127.0.0.1}")

    async def test_pinned_name_fetches_when_private_allowed(self, server):
        """http.resolve pins a name to a loopback address without any DNS query."""
        response = await _fetch(f"http://site.test:{server}/page", "http.resolve={site.test: 127.0.0.1}",
                                "http.allow_private_networks=true")
        assert response.status == 200
        assert b"hello" in response.body

    async def test_unresolvable_name_is_a_dns_error(self, server):
        """A name http.resolve maps to nothing fails as a DNS error, without leaving the machine."""
        with pytest.raises(DnsError):
            await _fetch(f"http://nowhere.test:{server}/", "http.resolve={nowhere.test: ''}",
                         "http.allow_private_networks=true")


class TestResponses:
    async def test_redirects_are_not_followed(self, server):
        """The protocol returns the 301 itself; the fetcher decides about the hop."""
        response = await _fetch(f"http://127.0.0.1:{server}/redirect", "http.allow_private_networks=true")
        assert response.status == 301
        assert response.header("location") == "/page"

    async def test_decompression_stops_at_the_content_limit(self, server):
        """A gzip bomb is cut at http.content_limit after decompression and flagged truncated."""
        response = await _fetch(f"http://127.0.0.1:{server}/bomb", "http.allow_private_networks=true",
                                "http.content_limit=100KiB")
        assert response.truncated
        assert len(response.body) == 100 * 1024

    async def test_refused_connection_is_a_connect_error(self):
        """Nothing listening on the port gives a ConnectError, not a crash."""
        with pytest.raises(ConnectError):
            await _fetch("http://127.0.0.1:1/", "http.allow_private_networks=true")


def _ssl_error(reason: str) -> ssl.SSLError:
    error = ssl.SSLError(1, reason)
    error.reason = reason  # what OpenSSL sets on a real one
    return error


@pytest.mark.parametrize(("raised", "kind", "message"), [
    (TimeoutError(), "timeout", "timed out"),
    (_ssl_error("WRONG_VERSION_NUMBER"), "tls", "TLS error: WRONG_VERSION_NUMBER"),  # an OSError: tls first
    (aiohttp.ClientPayloadError("cut short"), "protocol", "ClientPayloadError: cut short"),
    (aiohttp.ServerDisconnectedError(), "connect", "ServerDisconnectedError: Server disconnected"),
    (ConnectionResetError("reset"), "connect", "ConnectionResetError: reset"),
    (ValueError("a bug"), None, None),  # not a fetch failure: raised as it is (no FetchError)
])
def test_client_exceptions_map_to_fetch_error_kinds(raised, kind, message):
    """Each client library exception becomes its FetchError kind, the more specific ones first."""
    error = _fetch_error(raised, "http://a.test/")
    found = (error.kind, str(error)) if error is not None else (None, None)
    assert found == (kind, message)
