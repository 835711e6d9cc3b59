"""What a command reads and writes below crawl_dir, declared next to it in the CLI's command table.

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

    @property
    def stores(self) -> tuple[Store, ...]:
        return tuple(dict.fromkeys((*self.reads, *self.writes)))
