"""How a part's records are encoded: plain bodies deflated, compressed bodies stored, page text read back whole."""

from __future__ import annotations

import gzip
import io
import random
import zlib

import pyarrow.parquet as pq
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from crawler.models import PARSE_TEXT
from crawler.protocols.base import PROTOCOLS
from crawler.segments.warc import http_records
from crawler.segments.writer import write_parquet
from tests.fetcher.conftest import make_cfg

_WORDS = ["station", "rain", "gauge", "wind", "data", "logger", "storm", "copper", "solar", "frost"]
_HTML = ("<html><body>" + " ".join(random.Random(3).choice(_WORDS) for _ in range(6000)) + "</body></html>").encode()


async def test_plain_body_is_deflated_and_compressed_body_stored(tmp_path, servers):
    """A plain HTML body's record is deflated; a gzip-served body's record is about its own size; both verify."""
    async def plain(request: web.Request) -> web.Response:
        return web.Response(body=_HTML, content_type="text/html")

    async def gzipped(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(_HTML), content_type="text/html", headers={"Content-Encoding": "gzip"})

    site = await servers("127.0.0.1", {"/plain": plain, "/gz": gzipped})
    protocol = PROTOCOLS.load("http")(make_cfg(tmp_path))
    try:
        responses = [await protocol.fetch(site.url(p)) for p in ("/plain", "/gz")]
    finally:
        await protocol.aclose()
    sizes = []
    for response in responses:
        records = http_records(response)
        sizes.append(len(records))
        stored = next(iter(ArchiveIterator(io.BytesIO(records), check_digests="raise")))
        assert stored.raw_stream.read() == response.raw_body
    plain_size, gzip_size = sizes
    assert plain_size < len(_HTML) / 2  # deflated
    assert len(responses[1].raw_body) < gzip_size < len(responses[1].raw_body) + 2000  # stored, plus headers


async def test_plain_page_record_is_no_bigger_than_zlib_level_1_made_it(tmp_path, servers):
    """A plain page's response record (ISA-L level 1) is within 2 % of zlib level 1's size; both gzip members verify."""
    rng = random.Random(3)
    links = "".join(f'<a href="/{rng.choice(_WORDS)}/{rng.randrange(500)}">{rng.choice(_WORDS)} {rng.choice(_WORDS)}</a> '
                    for _ in range(1500))  # ~55 kB that deflates about as a real page does (~21 %)

    async def plain(request: web.Request) -> web.Response:
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    site = await servers("127.0.0.1", {"/plain": plain})
    protocol = PROTOCOLS.load("http")(make_cfg(tmp_path))
    try:
        response = await protocol.fetch(site.url("/plain"))
    finally:
        await protocol.aclose()
    records = http_records(response)
    stream = zlib.decompressobj(31)
    response_record = stream.decompress(records)
    assert stream.eof and gzip.decompress(stream.unused_data).startswith(b"WARC/1.0\r\nWARC-Type: request")
    response_size = len(records) - len(stream.unused_data)
    assert len(response.raw_body) > 50_000
    assert response_size <= 1.02 * len(zlib.compress(response_record, 1, 31))


def test_parse_text_round_trips_without_dictionary(tmp_path):
    """parse_text rows written without a dictionary page or statistics read back unchanged, non-ASCII and empty text included."""
    rows = [{"url": f"http://a.example/{i}", "text": t} for i, t in enumerate(["", "caf\u00e9 \u2019x\u2019", "w " * 9000])]
    path = tmp_path / "part-00000-00000.parquet"
    write_parquet(rows, PARSE_TEXT, path)
    assert pq.read_table(path).to_pylist() == rows
    assert pq.read_schema(path) == PARSE_TEXT
    group = pq.ParquetFile(path).metadata.row_group(0)  # crawler/parquet_encoding.py: no column gets a dictionary
    assert not any("DICTIONARY" in e for i in range(group.num_columns) for e in group.column(i).encodings)
    # nor statistics: the min and max of page texts are page texts, copied into every page header and the footer
    assert all(group.column(i).statistics is None for i in range(group.num_columns))
