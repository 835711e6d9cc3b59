"""gzip and deflate bodies decoded (by zlib-ng) as they arrive in pieces: the stdlib's bytes, the limit kept."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest
from aiohttp import web

from tests.conftest import serve_app
from tests.protocols.test_encodings_timeouts import fetch_once

_WORDS = ["harbour", "tide", "gull", "anchor", "rope", "salt", "keel", "mast", "buoy", "fog"]
_RNG = random.Random(5)
PAGE = ("<html><body>" + " ".join(f"{_RNG.choice(_WORDS)}{_RNG.randrange(1000)}" for _ in range(12_000))
        + "</body></html>").encode()


def _raw_deflate(data: bytes) -> bytes:
    obj = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return obj.compress(data) + obj.flush()


ENCODED = {
    "gzip": ("gzip", gzip.compress(PAGE, 6)),
    "deflate": ("deflate", zlib.compress(PAGE, 1)),
    "raw-deflate": ("deflate", _raw_deflate(PAGE)),
}


@pytest.fixture
async def server():
    async def pieces(request: web.Request) -> web.StreamResponse:
        encoding, body = ENCODED[request.match_info["name"]]
        response = web.StreamResponse(headers={"Content-Encoding": encoding, "Content-Type": "text/html"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(body), 997):  # a prime: the cuts fall anywhere in the deflate stream
            await response.write(body[start:start + 997])
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/{name}", pieces)
    async with serve_app(app) as port:
        yield port


@pytest.mark.parametrize("name", sorted(ENCODED))
async def test_body_in_pieces_decodes_to_the_page(server, name):
    """A compressed page sent in ~1 kB chunks decodes to exactly the page; the raw bytes stay as served."""
    response = await fetch_once(f"http://127.0.0.1:{server}/{name}")
    assert response.body == PAGE
    assert response.raw_body == ENCODED[name][1]
    assert not response.truncated


@pytest.mark.parametrize("name", sorted(ENCODED))
async def test_body_in_pieces_is_cut_at_the_content_limit(server, name):
    """Decoding in pieces stops at http.content_limit: exactly the page's first bytes, flagged truncated."""
    response = await fetch_once(f"http://127.0.0.1:{server}/{name}", "http.content_limit=50000")
    assert response.truncated
    assert response.body == PAGE[:50_000]
