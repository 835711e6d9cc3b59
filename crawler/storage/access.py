"""What each command reads and writes below crawl_dir (``ACCESS``, which the CLI hands to its commands).

A local crawl_dir ignores it. A remote one pulls exactly what is read into the
staging copy before the command, leases the stores it writes, and publishes
what it wrote afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Store = Literal["webdb", "linkdb"]
# Which segments a command reads: those named by its arguments, those the live webdb has not merged yet
# (what generate, crawl and the daemon resume or skip), all of them, or the named ones else all.
SegmentSelection = Literal["none", "args", "unmerged", "all", "args_or_all"]


@dataclass(frozen=True, slots=True)
class Access:
    reads: tuple[Store, ...] = ()
    writes: tuple[Store, ...] = ()  # leased while the command runs; a writer also reads what it writes
    segments: SegmentSelection = "none"
    segment_args: tuple[str, ...] = ()  # argparse destinations that name segments (path, name or URL)
    writes_segments: bool = False
    files: tuple[str, ...] = ()  # single files directly under crawl_dir, pulled and published (daemon state)
    # Reads and writes Parquet only through the job engine (crawler/jobs/engine.py): on Spark over a bucket the
    # executors then read and write it themselves, and the driver pulls references (crawler/storage/references.py).
    engine_io: bool = False
    # argparse destination of the fetchlist partitions fetched (all when empty): each is leased in the bucket
    # (crawler/storage/partition_lease.py), and only their files are pulled.
    partitions: str = ""
    # argparse flag under which Spark tasks lease, pull and publish each partition themselves (fetch --spark):
    # the driver's staging copy gets the fetchlist only.
    partitions_on_executors: str = ""
    # Runs several steps (crawl, the daemon): when the jobs go by reference and the fetch by copy (Spark jobs over
    # a bucket), each step is staged as its own command (crawler/storage/workspace.py), and the command leases
    # the crawl_dir's crawl.lock instead.
    by_step: bool = False

    @property
    def stores(self) -> tuple[Store, ...]:
        return tuple(dict.fromkeys((*self.reads, *self.writes)))


# What each command reads and writes below crawl_dir; a remote (s3://) crawl_dir pulls and publishes exactly that.
ACCESS: dict[str, Access] = {
    "inject": Access(writes=("webdb",), engine_io=True),
    "generate": Access(reads=("webdb",), segments="unmerged", writes_segments=True, engine_io=True),
    "fetch": Access(segments="args", segment_args=("segment",), writes_segments=True, partitions="partition",
                    partitions_on_executors="spark"),
    "parse": Access(segments="args", segment_args=("segment",), writes_segments=True),
    "updatedb": Access(writes=("webdb",), segments="args", segment_args=("segments",), engine_io=True),
    "invertlinks": Access(writes=("linkdb",), segments="args", segment_args=("segments",), engine_io=True),
    "updatesegs": Access(reads=("webdb", "linkdb"), segments="args", segment_args=("segments",),
                         writes_segments=True, engine_io=True),
    "dedup": Access(writes=("webdb",), engine_io=True),
    "crawl": Access(writes=("webdb", "linkdb"), segments="unmerged", writes_segments=True, by_step=True),
    "daemon": Access(writes=("webdb", "linkdb"), segments="unmerged", writes_segments=True,
                     files=("daemon-state.json",), by_step=True),
    "readdb": Access(reads=("webdb",)),
    "readseg": Access(reads=("webdb",), segments="args_or_all", segment_args=("dump", "get")),
    "readlinkdb": Access(reads=("linkdb",)),
}

# What a crawl or daemon staged by step has left to finish (unmerged segments, uninverted ones): markers and
# CURRENT only, so by reference.
STATE = Access(reads=("webdb", "linkdb"), segments="unmerged", engine_io=True)
# A segment's fetchlist alone, into the ordinary staging copy, leasing nothing (as a fetch --spark driver pulls it).
FETCHLIST = Access(segments="args", segment_args=("segment",), partitions="partition", partitions_on_executors="spark")
