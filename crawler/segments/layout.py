"""A segment on disk: its outputs, how parts and markers are named, and which partition a host belongs to.

The one place that spells the layout DESIGN.md fixes::

    fetchlist/part-PPPPP.parquet        one per partition (generate)
    <output>/part-PPPPP-SSSSS.<suffix>  a fetch's commit SSSSS of partition PPPPP (content: warc.gz)
    fetcher/_done-PPPPP                 every entry of partition PPPPP is recorded
    <output>/_SUCCESS                   the output is complete

Every other module asks this one for names, parses them here, and asks a ``Segment`` whether a fetch
(of the segment, or of one partition) is finished.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crawler.errors import SegmentError
from crawler.fsutil import atomic_write_text

OUTPUTS = ("fetchlist", "fetcher", "content", "parse_text", "parse_data")
FETCH_OUTPUTS = ("fetcher", "content", "parse_text", "parse_data")  # what a fetch writes, one part each per commit
PARSE_OUTPUTS = ("parse_text", "parse_data")  # what a re-parse rewrites
PARQUET_OUTPUTS = ("fetcher", "parse_text", "parse_data")  # content is WARC; fetchlist is checked by generate
SUCCESS = "_SUCCESS"
PART_PREFIX = "part-"
DONE_PREFIX = "_done-"  # below fetcher/: one marker per finished partition
MARKER_PREFIX = "_"  # _SUCCESS, _done-NNNNN: the files that vouch for others

_PART = re.compile(r"^part-(\d+)(?:-(\d+))?\.")
# By path in the segment, as a bucket listing gives them:
_FETCHLIST_PART = re.compile(r"^fetchlist/part-(\d+)\.parquet$")
_DONE = re.compile(r"^fetcher/_done-(\d+)$")
_PARTITION_FILE = re.compile(r"^[^/]+/(?:part-|_done-)(\d+)\b")  # an output's part or marker of one partition


def partition_of(host: str, partitions: int) -> int:
    """First 8 bytes of MD5(host), unsigned big-endian, mod the partition count (same on every engine)."""
    digest = hashlib.md5(host.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % partitions


def part_name(partition: int, seq: int | None = None, suffix: str = "parquet") -> str:
    if seq is None:
        return f"{PART_PREFIX}{partition:05d}.{suffix}"
    return f"{partition_prefix(partition)}{seq:05d}.{suffix}"


def partition_prefix(partition: int) -> str:
    """What the names of one partition's fetch parts start with: ``part-00003-``."""
    return f"{PART_PREFIX}{partition:05d}-"


def part_numbers(name: str) -> tuple[int, int | None] | None:
    """'part-00003-00012.parquet' -> (3, 12), 'part-00003.parquet' -> (3, None); None if not a part name."""
    match = _PART.match(name)
    if match is None:
        return None
    return int(match.group(1)), None if match.group(2) is None else int(match.group(2))


def commit_number(name: str) -> int | None:
    """'part-00003-00012.parquet' -> 12; None if not the name of a fetch commit's part."""
    numbers = part_numbers(name)
    return None if numbers is None else numbers[1]


def done_name(partition: int) -> str:
    return f"{DONE_PREFIX}{partition:05d}"


def file_partition(rel: str) -> int | None:
    """The partition of a file by its path in the segment: 'fetcher/part-00003-00001.parquet' and
    'fetcher/_done-00003' -> 3; None for a file of no one partition (``_SUCCESS``)."""
    match = _PARTITION_FILE.match(rel)
    return None if match is None else int(match.group(1))


def fetch_progress(rels: Iterable[str]) -> tuple[list[int], set[int]]:
    """From paths in a segment (a bucket listing): its fetchlist partitions, and those whose fetch is finished."""
    rels = list(rels)
    partitions = sorted({int(m.group(1)) for rel in rels if (m := _FETCHLIST_PART.match(rel))})
    return partitions, {int(m.group(1)) for rel in rels if (m := _DONE.match(rel))}


@dataclass(frozen=True, slots=True)
class Segment:
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    def dir(self, output: str) -> Path:
        return self.path / output

    def is_done(self, output: str) -> bool:
        return (self.path / output / SUCCESS).exists()

    def mark_done(self, output: str) -> None:
        atomic_write_text(self.path / output / SUCCESS, "")

    def parts(self, output: str, suffix: str = "parquet") -> list[Path]:
        folder = self.path / output
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.glob(f"{PART_PREFIX}*.{suffix}"))

    def glob(self, output: str, suffix: str = "parquet") -> str:
        return str(self.path / output / f"{PART_PREFIX}*.{suffix}")

    def fetchlist_part(self, partition: int) -> Path:
        return self.path / "fetchlist" / part_name(partition)

    def fetchlist_partitions(self) -> list[int]:
        return sorted(numbers[0] for p in self.parts("fetchlist") if (numbers := part_numbers(p.name)))

    def done_marker(self, partition: int) -> Path:
        return self.path / "fetcher" / done_name(partition)

    def partition_fetched(self, partition: int) -> bool:
        """Every entry of the partition's fetchlist is recorded (its ``_done`` marker is there)."""
        return self.done_marker(partition).exists()

    def mark_partition_fetched(self, partition: int) -> None:
        atomic_write_text(self.done_marker(partition), "")

    @property
    def fetched(self) -> bool:
        """The whole fetch finished (``fetcher/_SUCCESS``): what updatedb, invertlinks and a re-parse need."""
        return self.is_done("fetcher")

    @property
    def state(self) -> str:
        """incomplete (no fetchlist yet) | generated | fetching (begun: running or cut off) | fetched.

        Merged into the webdb or not is the webdb's to say (its version lists the segments it merged).
        """
        if not self.is_done("fetchlist"):
            return "incomplete"
        if not self.fetched:
            return "generated" if not self.dir("fetcher").exists() else "fetching"
        return "fetched"


def require_fetched(seg: Segment) -> None:
    """Refuse a segment whose fetch was cut off: merging it would take part of it for the whole."""
    if not seg.fetched:
        raise SegmentError(f"{seg.path}: fetch not finished (no fetcher/{SUCCESS}); resume the fetch first")


def open_segment(path: Path | str) -> Segment:
    seg = Segment(Path(path))
    if not seg.path.is_dir():
        raise SegmentError(f"{seg.path}: no such segment")
    if not seg.is_done("fetchlist"):
        raise SegmentError(f"{seg.path}: not a segment (no fetchlist/{SUCCESS})")
    return seg


def create_segment(segments_dir: Path, now: datetime | None = None) -> Segment:
    """A new segment folder named by UTC time with milliseconds, made with an exclusive mkdir."""
    segments_dir.mkdir(parents=True, exist_ok=True)
    moment = now or datetime.now(UTC)
    for _ in range(10_000):
        name = moment.strftime("%Y%m%dT%H%M%S") + f"{moment.microsecond // 1000:03d}Z"
        try:
            os.mkdir(segments_dir / name)
        except FileExistsError:
            moment += timedelta(milliseconds=1)
            continue
        return Segment(segments_dir / name)
    raise SegmentError(f"{segments_dir}: could not create a unique segment name")


def list_segments(segments_dir: Path) -> list[Segment]:
    if not segments_dir.is_dir():
        return []
    return [Segment(p) for p in sorted(segments_dir.iterdir()) if p.is_dir() and p.name[:1].isdigit()]
