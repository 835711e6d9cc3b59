"""Re-parse a fetched segment from its content, so a parser fix applies without refetching.

Each fetcher part ``part-P-S.parquet`` names the URLs fetched successfully in one
commit (the rows the fetch itself parses); their responses are in the content
part of the same name, stored as served, so bodies are decoded again per
Content-Encoding. Every pair becomes a parse_text and a parse_data part of the
same name, in a process pool (``parse.processes``) since parsing is CPU work.

The new folders are written beside the old ones under temporary names and
swapped in only when complete (atomically with Linux's
``renameat2(RENAME_EXCHANGE)``), so a reader never sees old and new parts mixed,
and a failure or a kill leaves the old outputs as they were.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError, SegmentError
from crawler.fsutil import TEMP_PREFIX, atomic_write_text, remove_tree, swap_dirs
from crawler.models import PARSE_DATA
from crawler.parsers.base import ParseResult
from crawler.parsers.dispatch import ParserDispatch
from crawler.parsers.rows import parse_rows
from crawler.protocols.decoding import Decoder
from crawler.segments.layout import PARSE_OUTPUTS, SUCCESS, Segment
from crawler.segments.writer import write_parquet, write_parse_text

LOCK = ".parse.lock"


@dataclass(slots=True)
class PartReport:
    part: str
    parsed: int = 0
    by_status: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class ReparseReport:
    segment: str
    parts: int = 0
    parsed: int = 0
    by_status: dict[str, int] = field(default_factory=dict)

    def add(self, part: PartReport) -> None:
        self.parts += 1
        self.parsed += part.parsed
        for status, count in part.by_status.items():
            self.by_status[status] = self.by_status.get(status, 0) + count


def _success_urls(fetcher_part: Path) -> set[str]:
    try:
        table = pq.read_table(fetcher_part, columns=["url", "status"])
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds; the message names the file
        raise SegmentError(f"{fetcher_part}: unreadable fetcher part ({type(exc).__name__}: {exc})") from exc
    urls, statuses = table.column("url").to_pylist(), table.column("status").to_pylist()
    return {u for u, s in zip(urls, statuses, strict=True) if s == "success" and u is not None}


def _payload(record: Any, limit: int) -> tuple[bytes, str | None, list[tuple[str, str]]]:
    """(decoded body, Content-Type, headers) of a WARC response or resource record."""
    raw = record.raw_stream.read()
    if record.rec_type != "response" or record.http_headers is None:
        return raw[:limit], record.rec_headers.get_header("Content-Type"), []
    http = record.http_headers
    decoder = Decoder(http.get_header("Content-Encoding"), limit)
    decoder.feed(raw)
    return decoder.finish(), http.get_header("Content-Type"), list(http.headers)


def reparse_part(
    dispatch: ParserDispatch, fetcher_part: Path, content_part: Path, out_dirs: dict[str, Path], limit: int
) -> PartReport:
    """Parse one content part into parse parts named like ``fetcher_part`` under ``out_dirs``."""
    wanted = _success_urls(fetcher_part)
    report = PartReport(fetcher_part.name)
    text_rows: list[dict[str, Any]] = []
    data_rows: list[dict[str, Any]] = []
    if wanted and not content_part.exists():
        raise SegmentError(
            f"{content_part}: missing, but {fetcher_part.name} records {len(wanted)} fetched URL(s)"
        )
    if wanted:
        try:
            with open(content_part, "rb") as fh:
                for record in ArchiveIterator(fh):
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    if record.rec_type not in ("response", "resource") or url not in wanted:
                        continue
                    wanted.discard(url)  # the first response of a URL is the one the fetch parsed
                    try:
                        body, content_type, headers = _payload(record, limit)
                    except CrawlerError as exc:  # a body the fetch could decode always decodes again
                        parsed = ParseResult(status="failed", reason=str(exc))
                    else:
                        parsed = dispatch.parse(body, url, content_type, headers=headers)
                    text, data = parse_rows(url, parsed)
                    text_rows.append(text)
                    data_rows.append(data)
                    report.by_status[parsed.status] = report.by_status.get(parsed.status, 0) + 1
        except (ArchiveLoadFailed, OSError, EOFError, ValueError) as exc:
            raise SegmentError(f"{content_part}: unreadable WARC part ({type(exc).__name__}: {exc})") from exc
    if wanted:  # the fetch stored a response for every success: a shortfall means a damaged part
        raise SegmentError(
            f"{content_part}: no response record for {len(wanted)} URL(s) fetched successfully "
            f"(truncated or corrupt WARC part?), e.g. {min(wanted)}"
        )
    report.parsed = len(data_rows)
    write_parse_text(text_rows, out_dirs["parse_text"] / fetcher_part.name)
    write_parquet(data_rows, PARSE_DATA, out_dirs["parse_data"] / fetcher_part.name)
    return report


def _clear_leftovers(segment: Segment) -> None:
    """Undo what a killed run left: a parked old output goes back, staging folders go."""
    for output in PARSE_OUTPUTS:
        leftovers = sorted(segment.path.glob(f"{TEMP_PREFIX}{output}-*"))
        parked = [p for p in leftovers if p.name.startswith(f"{TEMP_PREFIX}{output}-old.")]
        if not segment.dir(output).exists() and parked:
            os.rename(parked[0], segment.dir(output))
            leftovers.remove(parked[0])
        for path in leftovers:
            remove_tree(path)


@contextlib.contextmanager
def _segment_lock(segment: Segment) -> Iterator[None]:
    fd = os.open(segment.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SegmentError(
                f"{segment.path}: another 'crawler parse' is re-parsing this segment"
            ) from None
        yield
    finally:
        os.close(fd)  # closing releases the flock, also when the process is killed


def _parts(segment: Segment, log: Any) -> list[tuple[Path, Path]]:
    fetcher_parts = segment.parts("fetcher")
    names = {p.name.removesuffix(".parquet") for p in fetcher_parts}
    for orphan in segment.parts("content", "warc.gz"):
        if orphan.name.removesuffix(".warc.gz") not in names:  # never committed: not part of the segment
            log.warning("parse.orphan_content", part=str(orphan))
    return [(p, segment.dir("content") / p.name.replace(".parquet", ".warc.gz")) for p in fetcher_parts]


def reparse_segment(cfg: CrawlerConfig, segment: Segment, log: Any) -> ReparseReport:
    """Replace the segment's parse_text/ and parse_data/ with a fresh parse of its content."""
    if not segment.fetched:
        raise SegmentError(f"{segment.path}: fetch not complete (no fetcher/{SUCCESS}); fetch it first")
    log = log.bind(segment=segment.name)
    dispatch = ParserDispatch(cfg)
    report = ReparseReport(segment.name)
    with _segment_lock(segment):
        _clear_leftovers(segment)
        parts = _parts(segment, log)
        staging = {out: segment.path / f"{TEMP_PREFIX}{out}-new.{os.getpid()}" for out in PARSE_OUTPUTS}
        try:
            for folder in staging.values():
                folder.mkdir()
            processes = min(cfg.parse.processes or os.cpu_count() or 1, max(1, len(parts)))
            log.info("parse.start", parts=len(parts), processes=processes)
            limit = cfg.http.content_limit
            if processes == 1:
                results: Iterator[PartReport] = (
                    reparse_part(dispatch, f, c, staging, limit) for f, c in parts
                )
                for part in results:
                    report.add(part)
            else:
                with ProcessPoolExecutor(processes) as pool:
                    futures = [pool.submit(reparse_part, dispatch, f, c, staging, limit) for f, c in parts]
                    for future in futures:
                        report.add(future.result())
            for folder in staging.values():
                atomic_write_text(folder / SUCCESS, "")
            for output in PARSE_OUTPUTS:
                swap_dirs(staging[output], segment.dir(output))
        finally:
            for folder in staging.values():
                remove_tree(folder)  # after the swap this is the old output
    log.info("parse.done", parts=report.parts, parsed=report.parsed, by_status=report.by_status)
    return report
