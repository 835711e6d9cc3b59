"""inject, generate, fetch, parse, updatedb and crawl: the steps of the Nutch cycle."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig, with_overrides
from crawler.errors import SegmentError, UsageError
from crawler.fetcher.robots import Remembered
from crawler.fetcher.runner import RoundsPool, run_fetch
from crawler.jobs.engine import flush_databases
from crawler.jobs.generate import generate
from crawler.jobs.inject import inject
from crawler.jobs.invertlinks import invertlinks, unlinked_segments
from crawler.jobs.updatedb import updatedb
from crawler.log import get_logger
from crawler.memory import settle, trim
from crawler.segments.layout import Segment, open_segment
from crawler.segments.listing import segments_dir, unfinished_segments
from crawler.storage.access import STATE
from crawler.storage.workspace import FetchArgs, GenerateArgs, NoArgs, SegmentsArgs, Workspace, open_workspace


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
           pools: RoundsPool | None = None, robots_memory: Remembered | None = None) -> None:
    pool = pools.for_fetch(segment, partitions) if pools is not None else None
    run_fetch(cfg, segment, partitions, pool, robots_memory,
              start_pool=pools.later(segment) if pools is not None else None)


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


def cmd_crawl(cfg: CrawlerConfig, args: argparse.Namespace) -> int:
    log = get_logger(command="crawl")
    if args.rounds < 0:
        raise UsageError(f"--rounds must be 0 or more, got {args.rounds}")
    # One parse pool for the rounds, from the first that wants one, when fetching in this process.
    with RoundsPool(cfg) if cfg.fetcher.processes == 1 else contextlib.nullcontext() as pools:
        return _crawl(cfg, args, log, pools)


class _Steps:
    """The steps of a crawl round, each where the workspace runs it.

    A local crawl_dir, or a bucket staged for the whole command, runs them all in the one tree crawl runs in;
    with Spark jobs over a bucket each step is staged as its own command (crawler/storage/workspace.py), so the
    bucket holds every finished step and a kill loses only the one in progress.
    """

    def __init__(self, cfg: CrawlerConfig, log: Any, pools: RoundsPool | None) -> None:
        self.cfg, self.log, self.pools = cfg, log, pools
        self.workspace: Workspace = open_workspace(cfg)
        # Each round's fetch has its own event loop and connections; the robots.txt answers it settled
        # carry over, so a host's robots.txt is asked once per robots.cache_ttl, not once per round.
        self.robots: Remembered = {}

    def inject(self, seeds: Path) -> None:
        with self.workspace.step(self.cfg, "inject", NoArgs()) as run:
            inject(run.cfg, seeds, self.log)

    def pending(self) -> tuple[list[tuple[str, str]], list[str]]:
        """(name, state) of the segments generated but not merged, and the names merged but not inverted."""
        with self.workspace.step(self.cfg, STATE, NoArgs()) as run:
            return _pending(run.cfg)

    def generate(self, top_n: int | None) -> str | None:
        with self.workspace.step(self.cfg, "generate", GenerateArgs(top_n=top_n)) as run:
            segment = _generate(run.cfg, run.args.top_n, run.args.partitions)
        return segment.name if segment else None

    def fetch(self, name: str) -> None:
        flush_databases()  # the jobs' freed memory goes back now, not beside the fetch's new parse pool
        with self.workspace.step(self.cfg, "fetch", FetchArgs(name)) as run:  # staged: the partitions it leased
            _fetch(run.cfg, open_segment(segments_dir(run.cfg) / name), run.args.partition, self.pools, self.robots)
        if self.pools is not None:
            self.pools.release()
        trim()  # the heap the fetch's garbage held (collected as it ended), before updatedb's DuckDB memory

    def updatedb(self, name: str) -> None:
        with self.workspace.step(self.cfg, "updatedb", SegmentsArgs([name])) as run:
            _updatedb_fetched(run.cfg, open_segment(segments_dir(run.cfg) / name), self.log)

    def invertlinks(self, names: list[str]) -> None:
        with self.workspace.step(self.cfg, "invertlinks", SegmentsArgs(names)) as run:
            invertlinks(run.cfg, [open_segment(segments_dir(run.cfg) / n) for n in names], self.log)

    def end_round(self) -> None:
        self.workspace.end_round(self.cfg)


def _pending(cfg: CrawlerConfig) -> tuple[list[tuple[str, str]], list[str]]:
    return [(s.name, s.state) for s in unfinished_segments(cfg)], [s.name for s in unlinked_segments(cfg)]


def _updatedb_fetched(cfg: CrawlerConfig, segment: Segment, log: Any) -> None:
    # A fetch cut short (a partition leased elsewhere, a signal) must not be merged as if complete.
    if not segment.fetched:
        raise SegmentError(f"{segment.path}: fetch did not complete")
    updatedb(cfg, [segment], log)


def _crawl(cfg: CrawlerConfig, args: argparse.Namespace, log: Any, pools: RoundsPool | None) -> int:
    steps = _Steps(cfg, log, pools)
    settle()
    if args.seeds:
        steps.inject(Path(args.seeds))
    # A crash leaves segments generated, half fetched, or merged into the webdb but not into the
    # linkdb: finish them before generating anew.
    unfinished, unlinked = steps.pending()
    for name, state in unfinished:
        log.info("crawl.resume", segment=name, state=state)
        if state != "fetched":
            steps.fetch(name)
        steps.updatedb(name)
    if unfinished:  # just merged, so the linkdb has them to invert too
        unlinked = steps.pending()[1]
    if unlinked:
        log.info("crawl.resume", segments=unlinked, state="invertlinks")
        steps.invertlinks(unlinked)
    for round_no in range(1, args.rounds + 1):
        name = steps.generate(args.top_n)
        if name is None:
            log.info("crawl.done", rounds=round_no - 1, reason="nothing due")
            break
        print(segments_dir(cfg) / name, flush=True)
        steps.fetch(name)
        steps.updatedb(name)
        steps.invertlinks([name])
        steps.end_round()
        log.info("crawl.round", round=round_no, segment=name)
    else:
        log.info("crawl.done", rounds=args.rounds, reason="rounds done")
    return 0
