"""Where a Spark fetch task works on its partition, wherever the crawl lives (the executor's side of the seam).

A local ``crawl_dir`` (a shared mount every executor can write) is worked on in
place: nothing is leased or staged. An ``s3://`` one is staged per task in a
temporary copy on the executor: the task leases its partition in the bucket
(partition_lease.py), pulls the fetchlist and what a dead holder published of
it, and publishes its parts and ``_done`` marker when its fetch completes.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig, with_overrides
from crawler.crawldir import parse_remote
from crawler.errors import SegmentError
from crawler.segments.layout import Segment


@dataclass
class PartitionStage:
    """``partitions``: what the task is to fetch in ``segment`` with ``cfg`` (empty: nothing left to do);
    ``refused``: why it may not (another holder's lease...), else ""; ``publish()`` once the fetch completed."""

    cfg: CrawlerConfig
    segment: Segment
    partitions: list[int]
    refused: str = ""
    publish: Callable[[], None] = field(default=lambda: None)


def task_credentials(cfg: CrawlerConfig) -> Any:
    """What the driver hands its tasks to reach the crawl: its bucket credentials, or None for a local crawl."""
    if parse_remote(cfg.crawl_dir) is None:
        return None
    from crawler.storage.credentials import driver_credentials

    return driver_credentials(cfg.storage)


@contextmanager
def stage_partition(cfg: CrawlerConfig, credentials: Any, segment_path: str, partition: int,
                    log: Any) -> Iterator[PartitionStage]:
    remote = parse_remote(cfg.crawl_dir)
    if remote is None:
        yield PartitionStage(cfg, Segment(Path(segment_path)), [partition])
        return
    from crawler.storage.bucket import Bucket
    from crawler.storage.partition_lease import PartitionLeases
    from crawler.storage.segments import SegmentSync

    name = Path(segment_path).name
    bucket = Bucket(remote, cfg.storage, credentials=credentials)
    # Spark's scratch folders (spark.local.dir) are where an executor is meant to put bulky temporary data.
    scratch = (os.environ.get("SPARK_LOCAL_DIRS") or "").split(",")[0] or None
    with tempfile.TemporaryDirectory(prefix=f"crawler-fetch-{name}-{partition:05d}-", dir=scratch) as staging:
        task_cfg = with_overrides(cfg, storage={"staging_dir": staging})
        sync = SegmentSync(bucket, task_cfg.crawl_path)
        leases = PartitionLeases(sync, name, cfg.storage.lease_ttl, log)
        segment = Segment(task_cfg.crawl_path / "segments" / name)
        try:
            leased = leases.acquire([partition])
        except SegmentError as exc:
            yield PartitionStage(task_cfg, segment, [], refused=str(exc))
            return
        try:
            if not leased:
                log.info("storage.partitions_done", segment=name, partitions=[partition])
            else:
                sync.pull([name], partitions=leased)

            def publish() -> None:
                leases.verify()
                sync.publish({name: leased})  # parts, then the _done marker, then _SUCCESS if every one is done

            yield PartitionStage(task_cfg, segment, leased, publish=publish)
        finally:
            leases.release()
