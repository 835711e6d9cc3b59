"""Streams fetch results into a segment's four outputs, committed in parts.

Every ``commit_records`` records or ``commit_interval`` seconds the buffered
rows of one partition become one part in each output (fetcher, content,
parse_text, parse_data), each written under a temporary name and renamed, so a
killed fetch leaves only complete parts behind. The WARC and Parquet encoding
runs in a thread so the event loop keeps fetching meanwhile.

Each WARC file starts with a ``warcinfo`` record; HTTP answers are a
``response`` record (the body as served, content-encoded, de-chunked) and its
``request``; file: URLs are ``resource`` records (encoded by segments/warc.py).
With ``fetcher.parse_processes`` the records are encoded in the parse processes,
which hand them back with the page's parse rows; the part is written here all
the same.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from warcio.warcwriter import WARCWriter

from crawler.fsutil import atomic_output
from crawler.models import FETCHER, PARSE_DATA, PARSE_TEXT
from crawler.parquet_encoding import writer_options
from crawler.protocols.base import Response
from crawler.segments.held import held_size
from crawler.segments.layout import FETCH_OUTPUTS, Segment, commit_number, part_name, partition_prefix
from crawler.segments.warc import as_served, warc_records, warcinfo_record

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


def write_parquet(rows: list[dict[str, Any]], schema: pa.Schema, path: Path, slice_by: str | None = None) -> None:
    """``slice_by``: a column of big text values; the rows are then written in slices, a row group each."""
    with atomic_output(path) as temp, pq.ParquetWriter(temp, schema, compression="zstd",
                                                       **writer_options(schema)) as writer:
        for part in _slices(rows, slice_by):
            writer.write_table(pa.Table.from_pylist(part, schema=schema))


def write_parse_text(rows: list[dict[str, Any]], path: Path) -> None:
    """A parse_text part, as the fetcher and `parse` both write it."""
    write_parquet(rows, PARSE_TEXT, path, slice_by="text")


@dataclass(slots=True)
class _Pending:
    fetcher: list[dict[str, Any]] = field(default_factory=list)
    parse_text: list[dict[str, Any]] = field(default_factory=list)
    parse_data: list[dict[str, Any]] = field(default_factory=list)
    # A Response, or its WARC records as a parse process encoded them.
    responses: list[Response | bytes] = field(default_factory=list)
    bytes: int = 0


class PartitionWriter:
    """Buffers one partition's records and commits them as numbered parts."""

    def __init__(self, segment: Segment, partition: int, commit_records: int, commit_interval: float,
                 commit_bytes: int | None = None) -> None:
        self.segment = segment
        self.partition = partition
        self.commit_records = commit_records
        if commit_bytes is None:  # fetcher.commit_bytes's default (its one definition is the config's)
            # Imported here, not with the module: its Parquet writers (reparse's processes) need no pydantic.
            from crawler.config import FetcherConfig

            commit_bytes = FetcherConfig.model_fields["commit_bytes"].default
        self.commit_bytes: int = commit_bytes
        self.commit_interval = commit_interval
        self.seq = self._first_free_seq()
        self.pending = _Pending()
        self.last_commit = time.monotonic()
        self.committed = 0
        # asyncio on use: `crawler parse`'s processes import this module for its Parquet writers alone.
        import asyncio

        self._lock = asyncio.Lock()
        self._to_thread = asyncio.to_thread

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
        archived: Response | bytes | None = None,
    ) -> None:
        """``archived``: ``response``'s WARC records as a parse process encoded them (or, not HTTP, the
        response as served)."""
        self.pending.fetcher.append(fetch)
        if response is not None:
            self.pending.responses.append(archived if archived is not None else as_served(response))
            # Records a parse process encoded count as the body they archive, as a page parsed here: the same
            # parts whoever parsed (the records of a compressed page or of HTML are smaller: the bound errs safe).
            self.pending.bytes += len(response.raw_body)
        if parse_text is not None:
            self.pending.parse_text.append(parse_text)
        if parse_data is not None:
            self.pending.parse_data.append(parse_data)
        # A page's text and outlinks are held beside its body until the commit.
        self.pending.bytes += held_size(parse_text, parse_data)

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
            await self._to_thread(write_part, str(self.segment.path), self.partition, seq, batch)
            self.committed += len(batch.fetcher)


def write_part(segment_path: str, partition: int, seq: int, batch: _Pending) -> None:
    """Write one part of each output (in a thread: the event loop fetches meanwhile)."""
    seg = Segment(Path(segment_path))
    for output in FETCH_OUTPUTS:
        seg.dir(output).mkdir(parents=True, exist_ok=True)
    # Content and parse outputs first: a part of fetcher/ is the commit record that says
    # the other three exist, so resume logic only needs to look at fetcher/.
    warc_name = part_name(partition, seq, "warc.gz")
    # Straight to the temp file: built in memory, the part's WARC was held twice (the buffer and its
    # bytes) at the writer's peak.
    with atomic_output(seg.dir("content") / warc_name) as temp, open(temp, "wb", buffering=1 << 20) as out:
        warc = WARCWriter(out, gzip=True, warc_version="1.0")
        warcinfo_record(warc, warc_name)
        for response in batch.responses:
            warc_records(warc, response)
    write_parse_text(batch.parse_text, seg.dir("parse_text") / part_name(partition, seq))
    write_parquet(batch.parse_data, PARSE_DATA, seg.dir("parse_data") / part_name(partition, seq))
    write_parquet(batch.fetcher, FETCHER, seg.dir("fetcher") / part_name(partition, seq))
