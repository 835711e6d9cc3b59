"""The fetcher row built from a real response: the kept headers, the digest, the naive UTC fetch time."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from aiohttp import web

from crawler.fetcher.records import fetch_row
from crawler.models import FETCHER, FetchStatus
from crawler.protocols.base import PROTOCOLS
from tests.fetcher.conftest import make_cfg

_ROW_FIELDS = [name for name in FETCHER.names if name not in ("redirect_source", "redirect_hop")]


async def _fetch(tmp_path, servers, handler):
    site = await servers("127.0.0.1", {"/p": handler})
    protocol = PROTOCOLS.load("http")(make_cfg(tmp_path))
    try:
        return await protocol.fetch(site.url("/p"))
    finally:
        await protocol.aclose()


async def test_row_keeps_first_of_each_header_whatever_its_case(tmp_path, servers):
    """Content-Type, Last-Modified and ETag come from the first header of each name, any case, as Response.header."""
    async def page(request: web.Request) -> web.Response:
        headers = [("content-type", "text/html; charset=utf-8"), ("LAST-MODIFIED", "Mon, 30 Nov 2026 03:43:27 GMT"),
                   ("Etag", '"first"'), ("ETag", '"second"'), ("X-Other", "1")]
        response = web.Response(body=b"<p>hello</p>")
        for key, value in headers:
            response.headers.add(key, value)
        return response

    response = await _fetch(tmp_path, servers, page)
    before = datetime.now(UTC).replace(tzinfo=None)
    row = fetch_row({"url": response.url, "host": "127.0.0.1"}, FetchStatus.SUCCESS, reason="200 OK", response=response)
    after = datetime.now(UTC).replace(tzinfo=None)
    assert list(row) == _ROW_FIELDS
    assert (row["content_type"], row["last_modified"], row["etag"]) == (
        response.header("Content-Type"), response.header("Last-Modified"), response.header("ETag"))
    assert row["etag"] == '"first"'
    assert row["digest"] == hashlib.md5(b"<p>hello</p>").hexdigest()
    assert (row["http_status"], row["content_length"], row["truncated"]) == (200, 12, False)
    assert row["fetch_time"].tzinfo is None
    assert before - timedelta(milliseconds=1) <= row["fetch_time"] <= after + timedelta(milliseconds=1)


async def test_row_without_headers_or_success_has_nulls(tmp_path, servers):
    """A 404 without Last-Modified or ETag has them null and no digest; a row without a response has the same columns."""
    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, body=b"gone")

    response = await _fetch(tmp_path, servers, missing)
    entry = {"url": response.url, "host": "127.0.0.1"}
    row = fetch_row(entry, FetchStatus.GONE, reason="404 Not Found", response=response)
    assert (row["last_modified"], row["etag"], row["digest"]) == (None, None, None)
    assert row["content_type"] == response.header("Content-Type")
    denied = fetch_row(entry, FetchStatus.ROBOTS_DENIED, reason="robots.txt")
    assert list(denied) == _ROW_FIELDS
    assert denied["http_status"] is None and denied["status"] == "robots_denied"
    table = pa.Table.from_pylist([row, denied], schema=FETCHER)
    assert table.column("status").to_pylist() == ["gone", "robots_denied"]
