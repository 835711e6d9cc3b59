"""``crawler fetch SEGMENT --spark``: each fetchlist partition is one Spark task, an asyncio fetcher of its own.

As Nutch's fetcher runs as map tasks, one command fetches a segment across a
cluster: the driver hands out partition numbers (one per Spark partition), and
each task runs the ordinary fetcher on its fetchlist part, writing its own
output parts and its ``_done-NNNNN`` marker; the task that finishes last writes
``_SUCCESS``, exactly as separate ``fetch --partition I`` processes do. A host
lives in exactly one partition, so politeness holds cluster-wide.

Where the segment lives decides where a task works (crawler/storage/partition_stage.py stages it):

- a local ``crawl_dir`` (a shared mount every executor can write): in the
  segment itself. A failed or retried task resumes its partition (URLs already
  committed are skipped), so Spark's task retries are safe.
- an ``s3://`` ``crawl_dir``: in a temporary staging copy of its own on the
  executor. The task leases its partition in the bucket
  (crawler/storage/partition_lease.py), pulls the fetchlist and whatever a dead
  holder published of the partition, fetches, and publishes its parts and
  ``_done`` marker itself; the one that sees every marker in the bucket writes
  ``_SUCCESS`` there. The driver's staging copy only ever holds the fetchlist.
  The task carries the driver's credentials (crawler/storage/credentials.py),
  so worker machines need no AWS configuration of their own.
  A retried task fetches its partition again from what is in the bucket (parts
  are published when the partition is done, so usually from the start).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import uvloop

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError
from crawler.fetcher.service import fetch_segment
from crawler.segments.layout import Segment
from crawler.storage.partition_stage import stage_partition, task_credentials

# What a task reports: (partition, URLs fetched, stopped by a signal, why it did not fetch: "" when it did).
Result = tuple[int, int, bool, str]
Task = Callable[[Iterator[int]], Iterator[Result]]


def _fetch_task(cfg: CrawlerConfig, segment_path: str, credentials: Any = None) -> Task:
    """The executor side: fetch the partitions this Spark partition holds (one) and report each."""

    def run(partitions: Iterator[int]) -> Iterator[Result]:
        from crawler.log import configure_logging, get_logger

        configure_logging(cfg.log)
        log = get_logger(command="fetch", executor="spark")
        for partition in partitions:
            with stage_partition(cfg, credentials, segment_path, partition, log) as stage:
                if stage.refused or not stage.partitions:
                    yield partition, 0, False, stage.refused
                    continue
                report = uvloop.run(fetch_segment(stage.cfg, stage.segment, log, stage.partitions))
                if not report.stopped:
                    stage.publish()
                yield partition, report.fetched, report.stopped, ""

    return run


def fetch_on_spark(cfg: CrawlerConfig, segment: Segment, partitions: list[int] | None = None) -> int:
    """Fetch ``segment``'s partitions (all, or the given ones) as Spark tasks; returns the URLs fetched."""
    from crawler.jobs.spark_engine import spark_session  # pyspark is an optional dependency

    chosen = partitions if partitions is not None else segment.fetchlist_partitions()
    if not chosen:
        return 0
    context = spark_session(cfg).sparkContext
    context.setJobDescription(f"crawler fetch {segment.path}")
    task = _fetch_task(cfg, str(segment.path), task_credentials(cfg))
    results = context.parallelize(chosen, len(chosen)).mapPartitions(task).collect()
    refused = [why for _, _, _, why in results if why]
    if refused:
        raise CrawlerError(f"fetch of {segment.name}: " + "; ".join(refused))
    stopped = [p for p, _, halted, _ in results if halted]
    if stopped:
        raise CrawlerError(f"fetch of {segment.path}: partitions {stopped} were stopped; run it again to resume")
    return sum(fetched for _, fetched, _, _ in results)
