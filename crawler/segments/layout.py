"""Where a segment's parts live, how segments are named, and which partition a host belongs to."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crawler.errors import SegmentError
from crawler.fsutil import atomic_write_text

OUTPUTS = ("fetchlist", "fetcher", "content", "parse_text", "parse_data")
SUCCESS = "_SUCCESS"


def partition_of(host: str, partitions: int) -> int:
    """First 8 bytes of MD5(host), unsigned big-endian, mod the partition count (same on every engine)."""
    digest = hashlib.md5(host.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % partitions


def part_name(partition: int, seq: int | None = None, suffix: str = "parquet") -> str:
    if seq is None:
        return f"part-{partition:05d}.{suffix}"
    return f"part-{partition:05d}-{seq:05d}.{suffix}"


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
        return sorted(p for p in folder.glob(f"part-*.{suffix}"))

    def glob(self, output: str, suffix: str = "parquet") -> str:
        return str(self.path / output / f"part-*.{suffix}")

    @property
    def state(self) -> str:
        """generated | fetching (cut off) | fetched | parsed — what a later step may do with it."""
        if not self.is_done("fetchlist"):
            return "incomplete"
        if not self.is_done("fetcher"):
            return "generated" if not self.dir("fetcher").exists() else "fetching"
        return "fetched"


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
