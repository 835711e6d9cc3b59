"""The WARC records the segment writer builds itself are the bytes warcio would write, and read back with warcio."""

from __future__ import annotations

import gzip
import io
import re

from aiohttp import web
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler.protocols.base import PROTOCOLS, Response
from crawler.segments.writer import http_records
from tests.fetcher.conftest import make_cfg, page, redirect

_BODY = "<html><head><title>caf\u00e9</title></head><body>" + "text " * 4000 + "</body></html>"
_VOLATILE = re.compile(rb"<urn:uuid:[0-9a-f-]+>|WARC-Date: [0-9TZ:-]+")


def _warcio_records(response: Response) -> bytes:
    """The records as the writer made them with warcio before (the reference)."""
    writer = WARCWriter(io.BytesIO(), gzip=True, warc_version="1.0")
    path = response.url.split("/", 3)[3] if response.url.count("/") >= 3 else ""
    request = writer.create_warc_record(
        response.url, "request", payload=io.BytesIO(b""),
        http_headers=StatusAndHeaders(f"GET /{path} HTTP/1.1", response.request_headers, is_http_request=True))
    warc_headers = {}
    if response.peer_ip:
        warc_headers["WARC-IP-Address"] = response.peer_ip
    if response.truncated:
        warc_headers["WARC-Truncated"] = "length"
    headers = [(k, v) for k, v in response.headers if k.lower() != "transfer-encoding"]
    record = writer.create_warc_record(
        response.url, "response", payload=io.BytesIO(response.raw_body),
        http_headers=StatusAndHeaders(f"{response.status} {response.reason}".strip(), headers,
                                      protocol=f"HTTP/{response.http_version}"),
        warc_headers_dict=warc_headers)
    request.rec_headers.add_header("WARC-Concurrent-To", record.rec_headers.get_header("WARC-Record-ID"))
    writer.write_record(record)
    writer.write_record(request)
    return writer.out.getvalue()


def _comparable(gzipped: bytes) -> bytes:
    """Decompressed (every member), with record IDs and dates blanked, and IDs' cross references kept."""
    raw = gzip.decompress(gzipped)
    ids: dict[bytes, bytes] = {}
    return _VOLATILE.sub(lambda m: ids.setdefault(m.group(0), b"<id %d>" % len(ids))
                         if m.group(0).startswith(b"<") else b"WARC-Date: X", raw)


async def test_http_records_match_warcio_byte_for_byte(tmp_path, servers):
    """Gzipped, chunked, non-ASCII-header, redirect and truncated responses give warcio's bytes and valid digests."""
    async def gzipped(request: web.Request) -> web.StreamResponse:
        return web.Response(body=gzip.compress(_BODY.encode()), content_type="text/html",
                            headers={"Content-Encoding": "gzip", "X-Note": "d\u00e9j\u00e0 vu",
                                     "Content-Disposition": "inline; filename=\"\u00e9t\u00e9.html\""})

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(3):
            await response.write(b"chunk " * 100)
        await response.write_eof()
        return response

    site = await servers("127.0.0.1", {"/gz": gzipped, "/chunked": chunked, "/moved": redirect("/gz"),
                                       "/big": page(_BODY)})
    cfg = make_cfg(tmp_path, "http.content_limit=5000")
    protocol = PROTOCOLS.load("http")(cfg)
    try:
        responses = [await protocol.fetch(site.url(p)) for p in ("/gz", "/chunked", "/moved", "/big")]
    finally:
        await protocol.aclose()
    assert responses[3].truncated
    for response in responses:
        ours = http_records(response)
        assert _comparable(ours) == _comparable(_warcio_records(response)), response.url
        records = [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.raw_stream.read())
                   for r in ArchiveIterator(io.BytesIO(ours), check_digests="raise")]
        assert [(t, u) for t, u, _ in records] == [("response", response.url), ("request", response.url)]
        assert records[0][2] == response.raw_body


async def test_header_warcio_cannot_encode_is_written_percent_encoded(tmp_path, servers):
    """A non-ASCII value with a ';' outside name="value" (warcio raises on it) is stored percent-encoded."""
    async def odd(request: web.Request) -> web.StreamResponse:
        return web.Response(text="x", headers={"X-Odd": "d\u00e9j\u00e0; q=\"\u00e9\""})

    site = await servers("127.0.0.1", {"/odd": odd})
    protocol = PROTOCOLS.load("http")(make_cfg(tmp_path))
    try:
        response = await protocol.fetch(site.url("/odd"))
    finally:
        await protocol.aclose()
    record = next(iter(ArchiveIterator(io.BytesIO(http_records(response)), check_digests="raise")))
    stored = record.http_headers.get_header("X-Odd")
    assert stored.isascii() and "%" in stored
    assert record.content_stream().read() == b"x"
