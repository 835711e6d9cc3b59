"""Streams fetch results into a segment's four outputs, committed in parts.

Every ``commit_records`` records or ``commit_interval`` seconds the buffered
rows of one partition become one part in each output (fetcher, content,
parse_text, parse_data), each written under a temporary name and renamed, so a
killed fetch leaves only complete parts behind. The WARC and Parquet encoding
runs in a thread so the event loop keeps fetching meanwhile.

Each WARC file starts with a ``warcinfo`` record; HTTP answers are a
``response`` record (the body as served, content-encoded, de-chunked) and its
``request``; file: URLs are ``resource`` records. ``WARC-Block-Digest`` and ``WARC-Payload-Digest`` are
SHA-1 over exactly those bytes. The HTTP pairs, nearly every record, are
written by ``http_records`` below: the bytes warcio writes for them (header
order included; a test holds the two byte-equal once decompressed), at a fraction
of the CPU (warcio builds each record through streams, spooled files and a
digester in Python), deflated by zlib-ng at a low level (bodies sent compressed: stored).
warcio still writes warcinfo and resource records.
With ``fetcher.parse_processes`` the records are encoded in the parse processes
and the part is written in the pool's writer process (``write_part``), off the
fetch process's CPU entirely.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import io
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter
from zlib_ng import zlib_ng

from crawler import __version__
from crawler.fsutil import atomic_output, atomic_write_bytes
from crawler.models import FETCHER, PARSE_DATA, PARSE_TEXT
from crawler.protocols.base import Response
from crawler.segments.layout import FETCH_OUTPUTS, Segment, commit_number, part_name, partition_prefix

# Runs a picklable function and its arguments elsewhere (a worker process), returning its result.
Offload = Callable[..., Awaitable[Any]]

# Hop-by-hop framing that no longer describes the stored (de-chunked) payload.
_DROP_HEADERS = {"transfer-encoding"}


# Rows of ~this much ``slice_by`` text go to Arrow and Parquet together, as one row group. A whole
# part's page text (~60 MB for 2,000 pages) converted at once grew Arrow's buffer by doubling into
# fresh memory, faulted in anew for every part: in a crawl about half the column's CPU was the kernel
# zeroing pages (docs/benchmarks.md). Slices of a few MB reuse the same memory, still in cache for zstd.
_SLICE_CHARS = 2 << 20


def _slices(rows: list[dict[str, Any]], column: str | None) -> list[list[dict[str, Any]]]:
    """``rows`` cut where the ``column`` text reaches ``_SLICE_CHARS``; one (maybe empty) slice if no column."""
    if column is None:
        return [rows]
    slices: list[list[dict[str, Any]]] = []
    start = size = 0
    for end, row in enumerate(rows, 1):
        size += len(row.get(column) or "")
        if size >= _SLICE_CHARS:
            slices.append(rows[start:end])
            start, size = end, 0
    if start < len(rows) or not slices:
        slices.append(rows[start:])
    return slices


def write_parquet(rows: list[dict[str, Any]], schema: pa.Schema, path: Path, dictionary: bool = True,
                  slice_by: str | None = None) -> None:
    """``slice_by``: a column of big text values; the rows are then written in slices, a row group each."""
    with atomic_output(path) as temp, pq.ParquetWriter(temp, schema, compression="zstd",
                                                       use_dictionary=dictionary) as writer:
        for part in _slices(rows, slice_by):
            writer.write_table(pa.Table.from_pylist(part, schema=schema))


def write_parse_text(rows: list[dict[str, Any]], path: Path) -> None:
    """A parse_text part, as the fetcher and `parse` both write it."""
    # Page texts never repeat: a dictionary page would be built and thrown away (~5 us a row).
    write_parquet(rows, PARSE_TEXT, path, dictionary=False, slice_by="text")


def warcinfo_record(writer: WARCWriter, filename: str) -> None:
    info = {"software": f"crawler/{__version__}", "format": "WARC File Format 1.0",
            "description": "crawler segment content part"}
    writer.write_record(writer.create_warcinfo_record(filename, info))


# base64.b32encode is pure Python (~5 us a digest); a 160-bit digest is exactly 16 groups of 10 bits.
_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [a + b for a in _B32 for b in _B32]


def _sha1(*parts: bytes) -> str:
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part)
    n = int.from_bytes(digest.digest(), "big")
    # Written out: a loop over the 16 shifts costs half as much again (~1.5 vs ~1 us, three a request).
    p = _B32_PAIRS
    return "".join(("sha1:", p[n >> 150], p[n >> 140 & 1023], p[n >> 130 & 1023], p[n >> 120 & 1023],
                    p[n >> 110 & 1023], p[n >> 100 & 1023], p[n >> 90 & 1023], p[n >> 80 & 1023],
                    p[n >> 70 & 1023], p[n >> 60 & 1023], p[n >> 50 & 1023], p[n >> 40 & 1023],
                    p[n >> 30 & 1023], p[n >> 20 & 1023], p[n >> 10 & 1023], p[n & 1023]))


_EMPTY_SHA1 = _sha1(b"")


# Deflate level 1 instead of zlib's default 6: on a 35 kB HTML page ~4x less CPU (~0.27 vs ~1 ms) for
# ~17 % more bytes (25.5 vs 21.8 % of the page; docs/benchmarks.md, "Parts"). zlib-ng's level 2 is that
# size (25.2 %) at ~57 % of zlib's level 1 CPU (144 vs 251 us on a 30 kB page); its level 1 is a
# different, quicker search (69 us) that gives 29 % more bytes. Below ~4 kB (heads, request records,
# 404 and redirect bodies) a member's fixed cost dominates: level 1 there is ~4 us against ~11 (zlib's
# level 1 ~6 to 10), for ~50 more bytes a record.
_LEVEL = 2
_LEVEL_SMALL = 1
_SMALL = 4096


def _gzip_member(*parts: bytes, level: int = _LEVEL_SMALL) -> bytes:
    """One gzip member per record, as warcio writes them."""
    # zlib-ng, not the stdlib's zlib: the same format in less CPU (levels above), and none of zlib's
    # ~256 kB of buffers per member, which malloc can hand back to the kernel on free and fault in anew
    # for the next one (19 page faults, ~50 us for a 400-byte record; zlib-ng ~3 us, no faults). One
    # call on the joined parts: a compressobj and a call per part cost more than the copy.
    return zlib_ng.compress(b"".join(parts), level, zlib_ng.MAX_WBITS + 16)


def _http_head(protocol: str, statusline: str, headers: list[tuple[str, str]]) -> bytes:
    """The HTTP head as warcio stores it: ASCII, non-ASCII values percent-encoded (RFC 8187)."""
    try:
        # What StatusAndHeaders.to_ascii_bytes() gives for an ASCII head, without its header copy and
        # line-by-line += (~3 us a head).
        return "".join([protocol, " ", statusline, "\r\n", *[f"{k}: {v}\r\n" for k, v in headers], "\r\n"]
                       ).encode("ascii")
    except UnicodeEncodeError:
        pass
    try:
        return StatusAndHeaders(statusline, headers, protocol=protocol).to_ascii_bytes()
    except UnicodeEncodeError:
        # warcio encodes only the ``name="value"`` parts of a value with a ';', and fails on the
        # rest: such a value (a hostile or broken server) is percent-encoded whole instead. So is a
        # reason phrase that is not ASCII (warcio leaves it as it is, and fails); aiohttp hands its
        # bytes over as surrogate escapes, which go back to the bytes served.
        safe = [(k, v if v.isascii() else quote(v, errors="surrogateescape")) for k, v in headers]
        if not statusline.isascii():
            statusline = quote(statusline, safe=" ", errors="surrogateescape")
        return StatusAndHeaders(statusline, safe, protocol=protocol).to_ascii_bytes()


# WARC-Record-IDs are version 4 (random) UUID URNs. uuid.uuid4() costs an os.urandom call and a UUID
# object per ID (~3 us); these come from a Mersenne Twister seeded from os.urandom (2.5 kB of state),
# re-seeded in a forked child so that parent and child never share a stream. An ID must be unique, not
# unpredictable. Two IDs are drawn at once, each half given uuid4's version and variant bits.
_IDS = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_IDS.seed)
_V4_CLEAR = ~((0xF000 << 64 | 0xC000 << 48) * (1 | 1 << 128))
_V4_SET = (4 << 76 | 0x8000 << 48) * (1 | 1 << 128)


def _record_ids() -> tuple[str, str]:
    h = f"{_IDS.getrandbits(256) & _V4_CLEAR | _V4_SET:064x}"
    return (f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}>",
            f"<urn:uuid:{h[32:40]}-{h[40:44]}-{h[44:48]}-{h[48:52]}-{h[52:]}>")


@functools.lru_cache(maxsize=1)
def _warc_date(second: int) -> str:
    """WARC-Date to the second (as warcio writes it), formatted once a second rather than per record."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def http_records(response: Response) -> bytes:
    """The response record and its request record (gzipped), byte for byte what warcio writes for them."""
    path = response.url.split("/", 3)[3] if response.url.count("/") >= 3 else ""
    request_http = _http_head("GET", f"/{path} HTTP/1.1", response.request_headers)
    headers = [(k, v) for k, v in response.headers if k.lower() not in _DROP_HEADERS]
    response_http = _http_head(f"HTTP/{response.http_version}", f"{response.status} {response.reason}".strip(),
                               headers)
    body = response.raw_body
    date = _warc_date(int(time.time()))
    response_id, request_id = _record_ids()
    extra = ""
    if response.peer_ip:
        extra += f"WARC-IP-Address: {response.peer_ip}\r\n"
    if response.raw_truncated:  # the payload as served was cut, not just its decoded copy
        extra += "WARC-Truncated: length\r\n"
    response_head = (
        f"WARC/1.0\r\n{extra}WARC-Type: response\r\nWARC-Record-ID: {response_id}\r\n"
        f"WARC-Target-URI: {response.url}\r\nWARC-Date: {date}\r\n"
        f"WARC-Payload-Digest: {_sha1(body)}\r\nWARC-Block-Digest: {_sha1(response_http, body)}\r\n"
        f"Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(response_http) + len(body)}\r\n\r\n"
    ).encode()
    request_head = (
        f"WARC/1.0\r\nWARC-Type: request\r\nWARC-Record-ID: {request_id}\r\n"
        f"WARC-Target-URI: {response.url}\r\nWARC-Date: {date}\r\nWARC-Concurrent-To: {response_id}\r\n"
        f"WARC-Payload-Digest: {_EMPTY_SHA1}\r\nWARC-Block-Digest: {_sha1(request_http)}\r\n"
        f"Content-Type: application/http; msgtype=request\r\n"
        f"Content-Length: {len(request_http)}\r\n\r\n"
    ).encode()
    # A body sent gzip (br, zstd...) does not shrink: deflate would search it for matches (~150 us for
    # 7 kB) and then store it as it is anyway; level 0 stores it at once, the same size.
    if response.header("Content-Encoding") not in (None, "", "identity"):
        level = 0
    else:
        level = _LEVEL if len(body) >= _SMALL else _LEVEL_SMALL
    return (_gzip_member(response_head, response_http, body, b"\r\n\r\n", level=level)
            + _gzip_member(request_head, request_http, b"\r\n\r\n"))


def as_served(response: Response) -> Response:
    """``response`` without its decoded body: the archive keeps the bytes as served, and past parsing the
    decoded copy is only memory (or pickling) to pay for."""
    if response.body is not response.raw_body and response.body:
        return dataclasses.replace(response, body=b"")
    return response


def warc_records(writer: WARCWriter, response: Response | bytes) -> None:
    if isinstance(response, bytes):  # encoded by a parse process (crawler/fetcher/parsepool.py)
        writer.out.write(response)
        return
    if response.url.startswith(("http:", "https:")):
        writer.out.write(http_records(response))
        return
    ctype = response.header("Content-Type") or "application/octet-stream"
    writer.write_record(writer.create_warc_record(
        response.url, "resource", payload=io.BytesIO(response.raw_body), warc_content_type=ctype,
        length=len(response.raw_body), warc_headers_dict={"WARC-Truncated": "length"} if response.raw_truncated else None))


@dataclass(slots=True)
class _Pending:
    fetcher: list[dict[str, Any]] = field(default_factory=list)
    parse_text: list[dict[str, Any]] = field(default_factory=list)
    parse_data: list[dict[str, Any]] = field(default_factory=list)
    # A Response, its WARC records, or the key of a page a ParsePool's writer holds (with its rows).
    responses: list[Response | bytes | int] = field(default_factory=list)
    bytes: int = 0


class PartitionWriter:
    """Buffers one partition's records and commits them as numbered parts."""

    def __init__(self, segment: Segment, partition: int, commit_records: int, commit_interval: float,
                 offload: Offload | None = None, commit_bytes: int = 16 << 20) -> None:
        self.segment = segment
        self.offload = offload
        self.partition = partition
        self.commit_records = commit_records
        self.commit_bytes = commit_bytes
        self.commit_interval = commit_interval
        self.seq = self._first_free_seq()
        self.pending = _Pending()
        self.last_commit = time.monotonic()
        self.committed = 0
        self._lock = asyncio.Lock()

    def _first_free_seq(self) -> int:
        prefix = partition_prefix(self.partition)
        used = [seq for p in self.segment.parts("fetcher")
                if p.name.startswith(prefix) and (seq := commit_number(p.name)) is not None]
        return max(used) + 1 if used else 0

    def add(
        self,
        fetch: dict[str, Any],
        response: Response | None = None,
        parse_text: dict[str, Any] | None = None,
        parse_data: dict[str, Any] | None = None,
        stored: int | None = None,
    ) -> None:
        """``stored``: the key under which the pool's writer holds ``response`` and its parse rows."""
        self.pending.fetcher.append(fetch)
        if stored is not None and response is not None:
            self.pending.responses.append(stored)
            self.pending.bytes += len(response.raw_body)
        elif response is not None:
            response = as_served(response)
            self.pending.responses.append(response)
            self.pending.bytes += len(response.raw_body)
        if parse_text is not None:
            self.pending.parse_text.append(parse_text)
            # A page's text is held beside its body until the commit (as str, up to 4 bytes a character
            # for non-Latin-1 text; its length is the usual case's size).
            self.pending.bytes += len(parse_text.get("text") or "")
        if parse_data is not None:
            self.pending.parse_data.append(parse_data)

    def due(self) -> bool:
        return (
            len(self.pending.fetcher) >= self.commit_records
            or self.pending.bytes >= self.commit_bytes
            or (self.pending.fetcher and time.monotonic() - self.last_commit >= self.commit_interval)
        )

    async def commit_if_due(self) -> None:
        """Commit if due, unless a commit is being written: the workers that find one due meanwhile
        would each write a tiny part behind it (dozens per round, each with its fsyncs)."""
        if not self._lock.locked():
            if self.due():
                await self.commit()
        elif self.pending.bytes >= self.commit_bytes:
            # Over the size bound while a part is written: wait for it rather than buffer on (the bound
            # is what keeps memory flat), then commit unless another waiting worker already did.
            await self.commit(only_if_due=True)

    async def commit(self, only_if_due: bool = False) -> None:
        async with self._lock:
            if only_if_due and not self.due():
                return
            batch, self.pending = self.pending, _Pending()
            self.last_commit = time.monotonic()
            if not batch.fetcher:
                return
            seq, self.seq = self.seq, self.seq + 1
            if self.offload is not None:
                await self.offload(write_part, str(self.segment.path), self.partition, seq, batch)
            else:
                await asyncio.to_thread(write_part, str(self.segment.path), self.partition, seq, batch)
            self.committed += len(batch.fetcher)


def write_part(segment_path: str, partition: int, seq: int, batch: _Pending) -> None:
    """Write one part of each output; run in a thread, or in a worker process (all arguments pickle)."""
    seg = Segment(Path(segment_path))
    for output in FETCH_OUTPUTS:
        seg.dir(output).mkdir(parents=True, exist_ok=True)
    # Content and parse outputs first: a part of fetcher/ is the commit record that says
    # the other three exist, so resume logic only needs to look at fetcher/.
    buffer = io.BytesIO()
    warc = WARCWriter(buffer, gzip=True, warc_version="1.0")
    warc_name = part_name(partition, seq, "warc.gz")
    warcinfo_record(warc, warc_name)
    for response in batch.responses:
        warc_records(warc, response)
    atomic_write_bytes(seg.dir("content") / warc_name, buffer.getvalue())
    write_parse_text(batch.parse_text, seg.dir("parse_text") / part_name(partition, seq))
    write_parquet(batch.parse_data, PARSE_DATA, seg.dir("parse_data") / part_name(partition, seq))
    write_parquet(batch.fetcher, FETCHER, seg.dir("fetcher") / part_name(partition, seq))
