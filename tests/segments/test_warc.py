"""The WARC files a fetch writes pass `warcio check` and `warcio index`: warcinfo first, digests right."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import brotlicffi as brotli
from aiohttp import web

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
