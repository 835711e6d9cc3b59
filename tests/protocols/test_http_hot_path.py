"""The HTTP protocol's per-request shortcuts keep its behaviour: headers sent, address checks, bodies, limits."""

from __future__ import annotations

import gzip
import json

import pytest
from aiohttp import web

from crawler.config import load_config
from crawler.errors import BlockedAddress
from crawler.fetcher import parsepool
from crawler.protocols.decoding import ACCEPT_ENCODING
from crawler.protocols.http import HttpProtocol
from tests.conftest import serve_app

PIECES = [bytes([65 + i]) * 10_000 for i in range(8)]  # 80 kB sent in 8 writes


@pytest.fixture
async def server():
    async def echo(request):
        return web.json_response([[k.decode(), v.decode()] for k, v in request.raw_headers])

    async def pieces(request):
        response = web.StreamResponse()
        response.content_type = "text/plain"
        await response.prepare(request)
        for piece in PIECES:
            await response.write(piece)
        await response.write_eof()
        return response

    async def gzipped(request):
        return web.Response(body=gzip.compress(b"".join(PIECES)), headers={"Content-Encoding": "gzip"})

    app = web.Application()
    app.router.add_get("/echo", echo)
    app.router.add_get("/pieces", pieces)
    app.router.add_get("/gzipped", gzipped)
    async with serve_app(app) as port:
        yield port


@pytest.fixture
async def protocol():
    proto = HttpProtocol(load_config(None, ["http.allow_private_networks=true", "http.user_agent=hotpath-test/1.0"]))
    yield proto
    await proto.aclose()


class TestRequestHeaders:
    async def test_headers_sent_once_each_as_configured(self, server, protocol):
        """Accept, Accept-Encoding and User-Agent go out once each with our values, and the record lists them."""
        response = await protocol.fetch(f"http://127.0.0.1:{server}/echo")
        sent = [(k.lower(), v) for k, v in response_json(response)]
        names = [k for k, _ in sent]
        assert len(names) == len(set(names))
        assert dict(sent)["accept-encoding"] == ACCEPT_ENCODING
        assert dict(sent)["accept"].startswith("text/html")
        assert "hotpath-test/1.0" in dict(sent)["user-agent"]
        recorded = {k.lower(): v for k, v in response.request_headers}
        assert recorded["accept-encoding"] == ACCEPT_ENCODING

    async def test_conditional_headers_reach_the_server(self, server, protocol):
        """Extra headers (If-None-Match) are sent on that request only, not on the next one."""
        first = await protocol.fetch(f"http://127.0.0.1:{server}/echo", {"If-None-Match": '"v1"'})
        second = await protocol.fetch(f"http://127.0.0.1:{server}/echo")
        assert dict((k.lower(), v) for k, v in response_json(first))["if-none-match"] == '"v1"'
        assert "if-none-match" not in {k.lower() for k, _ in response_json(second)}


class TestAddressChecks:
    async def test_a_refused_literal_stays_refused(self, server):
        """Only passed hosts are remembered: a private literal is refused on every request, not just the first."""
        proto = HttpProtocol(load_config(None, []))
        try:
            for _ in range(2):
                with pytest.raises(BlockedAddress):
                    await proto.fetch(f"http://127.0.0.1:{server}/echo")
        finally:
            await proto.aclose()


class TestBodies:
    async def test_body_in_many_writes_is_whole(self, server, protocol):
        """A body that arrives in several pieces is returned whole, as served and decoded."""
        response = await protocol.fetch(f"http://127.0.0.1:{server}/pieces")
        assert response.body == b"".join(PIECES)
        assert response.raw_body == response.body
        assert not response.truncated
        # One copy: the page is held once, and a parse process is sent it once (the job's head, then one body).
        assert response.body is response.raw_body
        assert len(parsepool._page_job(1, response.url, response, "text/plain", True, [], False)) == 2

    async def test_plain_body_cut_at_the_limit_across_pieces(self, server):
        """A plain body over http.content_limit keeps exactly the limit, raw and decoded, and is flagged."""
        proto = HttpProtocol(load_config(None, ["http.allow_private_networks=true", "http.content_limit=25000"]))
        try:
            response = await proto.fetch(f"http://127.0.0.1:{server}/pieces")
        finally:
            await proto.aclose()
        assert response.truncated
        assert response.body == b"".join(PIECES)[:25_000]
        assert response.raw_body == response.body

    async def test_gzip_body_keeps_the_bytes_as_served(self, server, protocol):
        """A gzip body: raw_body is the compressed bytes as served, body the decoded text."""
        response = await protocol.fetch(f"http://127.0.0.1:{server}/gzipped")
        assert gzip.decompress(response.raw_body) == b"".join(PIECES)
        assert response.body == b"".join(PIECES)


def response_json(response) -> list[list[str]]:
    return json.loads(response.body)
