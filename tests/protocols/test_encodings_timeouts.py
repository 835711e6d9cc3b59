"""HTTP against real loopback servers: every Content-Encoding, bombs of each, and servers that misbehave."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import zlib

import brotlicffi as brotli
import pytest
import zstandard
from aiohttp import web

from crawler.config import load_config
from crawler.errors import ConnectError, FetchTimeout, ProtocolViolation
from crawler.protocols.http import HttpProtocol

TEXT = b"<html><title>t</title>" + b"hello world " * 2000 + b"</html>"
BOMB = b"a" * 30_000_000
ENCODERS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {name: encode(BOMB) for name, encode in ENCODERS.items()}


@pytest.fixture
async def server(bombs):
    release = asyncio.Event()  # set at teardown, so hanging handlers end and cleanup is quick

    async def encoded(request):
        enc = request.match_info["enc"]
        return web.Response(body=ENCODERS[enc](TEXT), headers={"Content-Encoding": enc})

    async def raw_deflate(request):
        obj = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return web.Response(body=obj.compress(TEXT) + obj.flush(), headers={"Content-Encoding": "deflate"})

    async def bomb(request):
        enc = request.match_info["enc"]
        return web.Response(body=bombs[enc], headers={"Content-Encoding": enc})

    async def trickle(request):
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        for _ in range(100):
            await resp.write(b"x")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(release.wait(), 0.1)
            if release.is_set():
                break
        return resp

    async def silent(request):
        await release.wait()
        return web.Response(text="too late")

    async def reset(request):
        request.transport.abort()
        await asyncio.sleep(0)
        return web.Response()

    async def garbage(request):
        return web.Response(body=b"not gzip at all", headers={"Content-Encoding": "gzip"})

    app = web.Application()
    app.router.add_get("/enc/{enc}", encoded)
    app.router.add_get("/raw-deflate", raw_deflate)
    app.router.add_get("/bomb/{enc}", bomb)
    app.router.add_get("/trickle", trickle)
    app.router.add_get("/silent", silent)
    app.router.add_get("/reset", reset)
    app.router.add_get("/garbage", garbage)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    release.set()
    await runner.cleanup()


async def fetch_once(url: str, *overrides: str):
    """One HttpProtocol.fetch of ``url`` with a fresh protocol (config ``overrides`` on top of loopback access)."""
    protocol = HttpProtocol(load_config(None, ["http.allow_private_networks=true", *overrides]))
    try:
        return await protocol.fetch(url)
    finally:
        await protocol.aclose()


class TestEncodings:
    @pytest.mark.parametrize("enc", sorted(ENCODERS))
    async def test_body_is_decoded_and_raw_kept(self, server, enc):
        """Each Content-Encoding we announce decodes to the page; the raw body stays as served for the WARC."""
        response = await fetch_once(f"{server}/enc/{enc}")
        assert response.body == TEXT
        assert response.raw_body == ENCODERS[enc](TEXT)
        assert not response.truncated

    async def test_raw_deflate_without_zlib_header(self, server):
        """deflate sent without the zlib header (a common server bug) still decodes."""
        assert (await fetch_once(f"{server}/raw-deflate")).body == TEXT

    @pytest.mark.parametrize("enc", sorted(ENCODERS))
    async def test_bomb_stops_at_the_content_limit(self, server, enc):
        """30 MB compressed to a few KB is cut at http.content_limit after decoding, and flagged truncated."""
        response = await fetch_once(f"{server}/bomb/{enc}", "http.content_limit=256KiB")
        assert response.truncated
        assert len(response.body) == 256 * 1024

    async def test_corrupt_body_is_a_protocol_error(self, server):
        """A body that is not what its Content-Encoding says fails as a protocol error, not a crash."""
        with pytest.raises(ProtocolViolation):
            await fetch_once(f"{server}/garbage")


class TestMisbehavingServers:
    async def test_trickling_server_hits_the_total_timeout(self, server):
        """A server sending one byte every 0.1 s cannot hold a worker past http.timeout.total."""
        with pytest.raises(FetchTimeout):
            await fetch_once(f"{server}/trickle", "http.timeout.total=1", "http.timeout.read=5")

    async def test_silent_server_hits_the_read_timeout(self, server):
        """A server that accepts the request and never answers fails with a timeout."""
        with pytest.raises(FetchTimeout):
            await fetch_once(f"{server}/silent", "http.timeout.read=0.5")

    async def test_connection_reset_is_a_connect_error(self, server):
        """A connection the server aborts mid-request is a ConnectError for that URL."""
        with pytest.raises(ConnectError):
            await fetch_once(f"{server}/reset")
