"""The WARC files a fetch writes pass `warcio check` and `warcio index`: warcinfo first, digests right."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import brotlicffi as brotli
import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from tests.fetcher.conftest import fetch, page, redirect


def _warcio(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "warcio.cli", *args], capture_output=True, text=True, timeout=60)


class TestWarcFiles:
    async def test_warcio_check_and_index_pass(self, tmp_path, servers):
        """Plain, gzip, br, chunked, redirect and 404 responses all verify, and index lists each record."""
        async def gzipped(request):
            return web.Response(body=gzip.compress(b"<html>g</html>" * 100),
                                headers={"Content-Encoding": "gzip", "Content-Type": "text/html"})

        async def brotlied(request):
            return web.Response(body=brotli.compress(b"<html>b</html>" * 100),
                                headers={"Content-Encoding": "br", "Content-Type": "text/html"})

        async def chunked(request):
            resp = web.StreamResponse(headers={"Content-Type": "text/html"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            for i in range(5):
                await resp.write(f"<p>chunk {i}</p>".encode())
            return resp

        site = await servers("127.0.0.1", {"/": page(), "/gz": gzipped, "/br": brotlied, "/chunked": chunked,
                                           "/moved": redirect("/")})
        urls = [site.url(p) for p in ("/", "/gz", "/br", "/chunked", "/moved", "/missing")]
        await fetch(tmp_path, urls, "fetcher.commit_records=3")
        warcs = sorted((tmp_path / "segments").glob("*/content/*.warc.gz"))
        assert len(warcs) >= 2
        check = _warcio("check", "-v", *map(str, warcs))
        assert check.returncode == 0, check.stdout + check.stderr
        assert "digest pass" in check.stdout
        index = _warcio("index", "-f", "warc-type,warc-target-uri", *map(str, warcs))
        assert index.returncode == 0, index.stderr
        records = [json.loads(line) for line in index.stdout.splitlines()]
        assert records[0]["warc-type"] == "warcinfo"
        assert sum(r["warc-type"] == "warcinfo" for r in records) == len(warcs)
        responses = {r["warc-target-uri"] for r in records if r["warc-type"] == "response"}
        assert responses == set(urls) | {site.url("/")}  # robots.txt answered 404 is not archived


LIMIT = 400_000
_PAGE = b"<html><body>" + b"<p>the same words again</p>" * 20_000 + b"</body></html>"  # 540 kB, gzip ~2 kB
_HEX = os.urandom(300_000).hex().encode()  # 600 kB; gzip ~330 kB: several reads, all within the limit
_NOISE = os.urandom(500_000)  # gzip cannot shrink it: over the limit as served


def _gzipped(body: bytes):
    async def handler(request):
        return web.Response(body=gzip.compress(body), headers={"Content-Encoding": "gzip", "Content-Type": "text/html"})
    return handler


def _plain(body: bytes):
    async def handler(request):
        return web.Response(body=body, headers={"Content-Type": "text/html"})
    return handler


# path, handler, body decoded -> fetcher row's truncated (the parsers saw part of it), WARC-Truncated (the archive did)
TRUNCATION = [
    ("/small-gzip", _gzipped(_PAGE), _PAGE, True, False),
    ("/gzip-in-pieces", _gzipped(_HEX), _HEX, True, False),
    ("/big-gzip", _gzipped(_NOISE), _NOISE, True, True),
    ("/big-plain", _plain(_NOISE), _NOISE, True, True),
    ("/exactly-the-limit", _plain(_NOISE[:LIMIT]), _NOISE[:LIMIT], False, False),
]


@pytest.mark.parametrize("processes", [0, 1], ids=["inline", "parse pool"])
async def test_warc_truncated_only_when_the_archived_payload_was_cut(tmp_path, servers, processes):
    """A gzip body within http.content_limit is archived whole, unmarked, even when it decodes past the limit;
    a payload cut at the limit as served is marked WARC-Truncated: length. warcio reads and checks both."""
    site = await servers("127.0.0.1", {path: handler for path, handler, *_ in TRUNCATION})
    _, rows, _ = await fetch(tmp_path, [site.url(p) for p, *_ in TRUNCATION], f"http.content_limit={LIMIT}",
                             pool_processes=processes)
    warcs = sorted((tmp_path / "segments").glob("*/content/*.warc.gz"))
    check = _warcio("check", *map(str, warcs))
    assert check.returncode == 0, check.stdout + check.stderr
    records = {}
    for warc in warcs:
        with open(warc, "rb") as fh:
            for record in ArchiveIterator(fh, check_digests="raise"):
                if record.rec_type == "response":
                    raw = record.raw_stream.read()
                    records[record.rec_headers.get_header("WARC-Target-URI")] = (
                        record.rec_headers.get_header("WARC-Truncated"), raw)
    for path, _, body, content_cut, archive_cut in TRUNCATION:
        url = site.url(path)
        assert rows[url]["truncated"] is content_cut, path
        marked, payload = records[url]
        assert marked == ("length" if archive_cut else None), path
        if archive_cut:
            assert len(payload) == LIMIT, path
        elif path.endswith("gzip") or "gzip-" in path:
            assert gzip.decompress(payload) == body, path  # every byte served: the whole page decodes
        else:
            assert payload == body, path
