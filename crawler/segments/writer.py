"""Streams fetch results into a segment's four outputs, committed in parts.

Every ``commit_records`` records or ``commit_interval`` seconds the buffered
rows of one partition become one part in each output (fetcher, content,
parse_text, parse_data), each written under a temporary name and renamed, so a
killed fetch leaves only complete parts behind. The WARC and Parquet encoding
runs in a thread so the event loop keeps fetching meanwhile.

Each WARC file starts with a ``warcinfo`` record; HTTP answers are a
``response`` record (the body as served, content-encoded, de-chunked) and its
``request``; file: URLs are ``resource`` records. warcio computes
``WARC-Block-Digest`` and ``WARC-Payload-Digest`` over exactly those bytes.
With ``fetcher.parse_processes`` the encoding and writing of a part runs in a
worker process (``write_part``), off the fetch process's CPU entirely.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler import __version__
from crawler.fsutil import atomic_output, atomic_write_bytes
from crawler.models import FETCHER, PARSE_DATA, PARSE_TEXT
from crawler.protocols.base import Response
from crawler.segments.layout import Segment, part_name

# Runs a picklable function and its arguments elsewhere (a worker process), returning its result.
Offload = Callable[..., Awaitable[Any]]

# Hop-by-hop framing that no longer describes the stored (de-chunked) payload.
_DROP_HEADERS = {"transfer-encoding"}


def write_parquet(rows: list[dict[str, Any]], schema: pa.Schema, path: Path) -> None:
    table = pa.Table.from_pylist(rows, schema=schema)
    with atomic_output(path) as temp:
        pq.write_table(table, temp, compression="zstd")


def warcinfo_record(writer: WARCWriter, filename: str) -> None:
    info = {"software": f"crawler/{__version__}", "format": "WARC File Format 1.0",
            "description": "crawler segment content part"}
    writer.write_record(writer.create_warcinfo_record(filename, info))


def warc_records(writer: WARCWriter, response: Response) -> None:
    if not response.url.startswith(("http:", "https:")):
        ctype = response.header("Content-Type") or "application/octet-stream"
        writer.write_record(writer.create_warc_record(
            response.url, "resource", payload=io.BytesIO(response.raw_body), warc_content_type=ctype,
            length=len(response.raw_body)))
        return
    path = response.url.split("/", 3)[3] if response.url.count("/") >= 3 else ""
    request = writer.create_warc_record(
        response.url,
        "request",
        payload=io.BytesIO(b""),
        http_headers=StatusAndHeaders(f"GET /{path} HTTP/1.1", response.request_headers, is_http_request=True),
    )
    warc_headers = {}
    if response.peer_ip:
        warc_headers["WARC-IP-Address"] = response.peer_ip
    if response.truncated:
        warc_headers["WARC-Truncated"] = "length"
    headers = [(k, v) for k, v in response.headers if k.lower() not in _DROP_HEADERS]
    record = writer.create_warc_record(
        response.url,
        "response",
        payload=io.BytesIO(response.raw_body),
        http_headers=StatusAndHeaders(
            f"{response.status} {response.reason}".strip(), headers, protocol=f"HTTP/{response.http_version}"
        ),
        warc_headers_dict=warc_headers,
    )
    request.rec_headers.add_header("WARC-Concurrent-To", record.rec_headers.get_header("WARC-Record-ID"))
    writer.write_record(record)
    writer.write_record(request)


@dataclass(slots=True)
class _Pending:
    fetcher: list[dict[str, Any]] = field(default_factory=list)
    parse_text: list[dict[str, Any]] = field(default_factory=list)
    parse_data: list[dict[str, Any]] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)
    bytes: int = 0


class PartitionWriter:
    """Buffers one partition's records and commits them as numbered parts."""

    def __init__(self, segment: Segment, partition: int, commit_records: int, commit_interval: float,
                 offload: Offload | None = None) -> None:
        self.segment = segment
        self.offload = offload
        self.partition = partition
        self.commit_records = commit_records
        self.commit_interval = commit_interval
        self.seq = self._first_free_seq()
        self.pending = _Pending()
        self.last_commit = time.monotonic()
        self.committed = 0
        self._lock = asyncio.Lock()

    def _first_free_seq(self) -> int:
        prefix = f"part-{self.partition:05d}-"
        used = [int(p.stem.split("-")[2]) for p in self.segment.parts("fetcher") if p.name.startswith(prefix)]
        return max(used) + 1 if used else 0

    def add(
        self,
        fetch: dict[str, Any],
        response: Response | None = None,
        parse_text: dict[str, Any] | None = None,
        parse_data: dict[str, Any] | None = None,
    ) -> None:
        self.pending.fetcher.append(fetch)
        if response is not None:
            if response.body is not response.raw_body and response.body:
                # The archive keeps the bytes as served; the decoded copy is not needed past parsing.
                response = dataclasses.replace(response, body=b"")
            self.pending.responses.append(response)
            self.pending.bytes += len(response.raw_body)
        if parse_text is not None:
            self.pending.parse_text.append(parse_text)
        if parse_data is not None:
            self.pending.parse_data.append(parse_data)

    def due(self) -> bool:
        return (
            len(self.pending.fetcher) >= self.commit_records
            or self.pending.bytes >= 64 * 1024 * 1024
            or (self.pending.fetcher and time.monotonic() - self.last_commit >= self.commit_interval)
        )

    async def commit_if_due(self) -> None:
        """Commit if due, unless a commit is being written: the workers that find one due meanwhile
        would each write a tiny part behind it (dozens per round, each with its fsyncs)."""
        if not self._lock.locked() and self.due():
            await self.commit()

    async def commit(self) -> None:
        async with self._lock:
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
    for output in ("fetcher", "content", "parse_text", "parse_data"):
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
    write_parquet(batch.parse_text, PARSE_TEXT, seg.dir("parse_text") / part_name(partition, seq))
    write_parquet(batch.parse_data, PARSE_DATA, seg.dir("parse_data") / part_name(partition, seq))
    write_parquet(batch.fetcher, FETCHER, seg.dir("fetcher") / part_name(partition, seq))
