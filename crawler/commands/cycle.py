"""inject, generate, fetch, parse, updatedb and crawl: the steps of the Nutch cycle."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig, with_overrides
from crawler.errors import SegmentError, UsageError
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.runner import own_parse_pool, run_fetch
from crawler.jobs.generate import generate
from crawler.jobs.inject import inject
from crawler.jobs.invertlinks import invertlinks, unlinked_segments
from crawler.jobs.updatedb import updatedb
from crawler.log import get_logger
from crawler.segments.layout import Segment, list_segments, open_segment
from crawler.storage.session import publish_round
from crawler.webdb.store import VersionedStore


def segments_dir(cfg: CrawlerConfig) -> Path:
    return cfg.crawl_path / "segments"


def cmd_inject(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    inject(cfg, Path(args.path), get_logger(command="inject"))
    return 0


def _generate(cfg: CrawlerConfig, top_n: int | None, partitions: int | None) -> Segment | None:
    fields = {k: v for k, v in (("top_n", top_n), ("partitions", partitions)) if v is not None}
    for key, value in fields.items():
        if value < 1:
            raise UsageError(f"--{key.replace('_', '-')} must be at least 1, got {value}")
    if fields:
        cfg = with_overrides(cfg, generate=fields)
    return generate(cfg, get_logger(command="generate")).segment


def cmd_generate(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    segment = _generate(cfg, args.top_n, args.partitions)
    if segment is not None:
        print(segment.path, flush=True)
    return 0


def _fetch(cfg: CrawlerConfig, segment: Segment, partitions: list[int] | None = None,
           parse_pool: ParsePool | None = None) -> None:
    run_fetch(cfg, segment, partitions, parse_pool)


def cmd_fetch(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    if getattr(args, "spark", False):
        from crawler.fetcher.spark_fetch import fetch_on_spark  # pyspark is an optional dependency

        fetch_on_spark(cfg, open_segment(args.segment), args.partition)
        return 0
    _fetch(cfg, open_segment(args.segment), args.partition)
    return 0


def cmd_updatedb(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    updatedb(cfg, [open_segment(s) for s in args.segments], get_logger(command="updatedb"))
    return 0


def unfinished_segments(cfg: CrawlerConfig) -> list[Segment]:
    """Segments generated but not yet merged into the live webdb, oldest first."""
    version = VersionedStore(cfg.crawl_path / "webdb").current()
    merged = set(version.merged_segments) if version else set()
    return [s for s in list_segments(segments_dir(cfg)) if s.is_done("fetchlist") and s.name not in merged]


def cmd_crawl(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    log = get_logger(command="crawl")
    if args.rounds < 0:
        raise UsageError(f"--rounds must be 0 or more, got {args.rounds}")
    # One parse pool for every round (its workers start while inject runs), when fetching in this process.
    with own_parse_pool(cfg) if cfg.fetcher.processes == 1 else contextlib.nullcontext() as pool:
        return _crawl(cfg, args, log, pool)


def _crawl(cfg: CrawlerConfig, args: argparse.Namespace, log: Any, pool: ParsePool | None) -> int:
    if args.seeds:
        inject(cfg, Path(args.seeds), log)
    # A crash leaves segments generated, half fetched, or merged into the webdb but not into the
    # linkdb: finish them before generating anew.
    for segment in unfinished_segments(cfg):
        log.info("crawl.resume", segment=segment.name, state=segment.state)
        if not segment.is_done("fetcher"):
            _fetch(cfg, segment, parse_pool=pool)
        updatedb(cfg, [segment], log)
    if pending := unlinked_segments(cfg):
        log.info("crawl.resume", segments=[s.name for s in pending], state="invertlinks")
        invertlinks(cfg, pending, log)
    for round_no in range(1, args.rounds + 1):
        segment = _generate(cfg, args.top_n, None)
        if segment is None:
            log.info("crawl.done", rounds=round_no - 1, reason="nothing due")
            break
        print(segment.path, flush=True)
        _fetch(cfg, segment, parse_pool=pool)
        if not segment.is_done("fetcher"):
            raise SegmentError(f"{segment.path}: fetch did not complete")
        updatedb(cfg, [segment], log)
        invertlinks(cfg, [segment], log)
        publish_round(cfg)  # a remote crawl_dir gets each round as it completes
        log.info("crawl.round", round=round_no, segment=segment.name)
    else:
        log.info("crawl.done", rounds=args.rounds, reason="rounds done")
    return 0
