"""``crawler fetch SEGMENT --spark``: each fetchlist partition is one Spark task, an asyncio fetcher of its own.

As Nutch's fetcher runs as map tasks, one command fetches a segment across a
cluster: the driver hands out partition numbers (one per Spark partition), and
each task runs the ordinary fetcher on its fetchlist part, writing its own
output parts and its ``_done-NNNNN`` marker; the task that finishes last writes
``_SUCCESS``, exactly as separate ``fetch --partition I`` processes do. A host
lives in exactly one partition, so politeness holds cluster-wide. A failed or
retried task resumes its partition (URLs already committed are skipped), so
Spark's task retries are safe. The segment must be on storage every executor
can write (a shared mount; see docs/scale-out.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import uvloop

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError
from crawler.fetcher.service import fetch_segment, fetchlist_partitions
from crawler.segments.layout import Segment

Task = Callable[[Iterator[int]], Iterator[tuple[int, int, bool]]]


def _fetch_task(cfg: CrawlerConfig, segment_path: str) -> Task:
    """The executor side: fetch the partitions this Spark partition holds (one), report (partition, fetched, stopped)."""

    def run(partitions: Iterator[int]) -> Iterator[tuple[int, int, bool]]:
        from crawler.log import configure_logging, get_logger

        configure_logging(cfg.log)
        log = get_logger(command="fetch", executor="spark")
        for partition in partitions:
            report = uvloop.run(fetch_segment(cfg, Segment(Path(segment_path)), log, [partition]))
            yield partition, report.fetched, report.stopped

    return run


def fetch_on_spark(cfg: CrawlerConfig, segment: Segment, partitions: list[int] | None = None) -> int:
    """Fetch ``segment``'s partitions (all, or the given ones) as Spark tasks; returns the URLs fetched."""
    from crawler.jobs.spark_engine import spark_session  # pyspark is an optional dependency

    chosen = partitions if partitions is not None else fetchlist_partitions(segment)
    if not chosen:
        return 0
    context = spark_session(cfg).sparkContext
    context.setJobDescription(f"crawler fetch {segment.path}")
    results = context.parallelize(chosen, len(chosen)).mapPartitions(_fetch_task(cfg, str(segment.path))).collect()
    stopped = [p for p, _, halted in results if halted]
    if stopped:
        raise CrawlerError(f"fetch of {segment.path}: partitions {stopped} were stopped; run it again to resume")
    return sum(fetched for _, fetched, _ in results)
