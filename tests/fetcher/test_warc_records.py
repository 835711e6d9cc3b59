"""The WARC records the segment writer builds itself are the bytes warcio would write, and read back with warcio."""

from __future__ import annotations

import asyncio
import gzip
import io
import os
import re
import time
import uuid
from datetime import UTC, datetime

from aiohttp import web
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler.protocols.base import PROTOCOLS, Response
from crawler.segments.warc import http_records
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
    if response.raw_truncated:
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


async def _one_response(tmp_path, servers) -> Response:
    site = await servers("127.0.0.1", {"/p": page(_BODY)})
    protocol = PROTOCOLS.load("http")(make_cfg(tmp_path))
    try:
        return await protocol.fetch(site.url("/p"))
    finally:
        await protocol.aclose()


def _ids(records: bytes) -> list[tuple[str, str | None]]:
    return [(r.rec_headers.get_header("WARC-Record-ID"), r.rec_headers.get_header("WARC-Concurrent-To"))
            for r in ArchiveIterator(io.BytesIO(records))]


async def test_record_ids_are_distinct_version_4_uuid_urns(tmp_path, servers):
    """Every record of 2,000 pairs gets its own RFC 4122 version 4 UUID URN, and each request points at its response."""
    response = await _one_response(tmp_path, servers)
    seen = []
    for _ in range(2000):
        (response_id, _), (request_id, concurrent) = _ids(http_records(response))
        assert concurrent == response_id
        seen += [response_id, request_id]
    assert len(set(seen)) == len(seen)
    for record_id in seen[:200]:
        assert record_id.startswith("<urn:uuid:") and record_id.endswith(">")
        parsed = uuid.UUID(record_id[10:-1])
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == record_id[10:-1]


async def test_a_forked_child_draws_other_record_ids_than_its_parent(tmp_path, servers):
    """A process forked after records were made (a worker) does not repeat its parent's next record IDs."""
    response = await _one_response(tmp_path, servers)
    http_records(response)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # the child writes its next IDs and leaves at once, running nothing of pytest's
        os.write(writer, " ".join(i for i, _ in _ids(http_records(response))).encode())
        os._exit(0)
    os.close(writer)
    parent_ids = [i for i, _ in _ids(http_records(response))]
    with os.fdopen(reader, "rb") as pipe:
        child_ids = pipe.read().decode().split()
    assert os.waitpid(child, 0)[1] == 0
    assert len(child_ids) == 2 and not set(child_ids) & set(parent_ids)


async def test_warc_date_is_the_second_the_records_were_made(tmp_path, servers):
    """WARC-Date (formatted once a second) is the UTC second of the call, in warcio's format, across seconds."""
    response = await _one_response(tmp_path, servers)
    dates = []
    for _ in range(3):
        before = int(time.time())
        records = list(ArchiveIterator(io.BytesIO(http_records(response))))
        after = int(time.time())
        dates += [r.rec_headers.get_header("WARC-Date") for r in records]
        for record in records:
            date = record.rec_headers.get_header("WARC-Date")
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", date)
            assert before <= datetime.strptime(date, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp() <= after
        await asyncio.sleep(0.6)  # the next call falls in another second at least once
    assert len(set(dates)) >= 2


async def test_reason_phrase_that_is_not_ascii_is_stored_percent_encoded(tmp_path):
    """A status line with non-ASCII bytes in its reason (warcio fails on it) is stored as those bytes percent-encoded."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 D\xe9j\xe0 OK\r\nContent-Length: 2\r\n\r\nhi")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    protocol = PROTOCOLS.load("http")(make_cfg(tmp_path))
    try:
        response = await protocol.fetch(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x")
    finally:
        await protocol.aclose()
        server.close()
        await server.wait_closed()
    record = next(iter(ArchiveIterator(io.BytesIO(http_records(response)), check_digests="raise")))
    assert record.http_headers.protocol == "HTTP/1.1"
    assert record.http_headers.statusline == "200 D%E9j%E0 OK"
    assert record.content_stream().read() == b"hi"
