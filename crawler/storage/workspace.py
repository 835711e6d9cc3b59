"""The one seam between the crawl and where its crawl_dir lives, chosen once from the config.

``open_workspace`` picks one of three, and the commands and the daemon only ask
it for paths and staged steps, never where the crawl lives:

- ``Workspace``: a local crawl_dir. The jobs work on it as it is; nothing is staged.
- ``BucketWorkspace``: an ``s3://`` crawl_dir with DuckDB jobs. A command runs
  in the staging copy, pulled before it and published after it (``Session``);
  crawl and the daemon publish each round as it completes.
- ``SteppedWorkspace``: Spark jobs over a bucket. The jobs go by reference (the
  executors read and write the bucket) while a fetch reads real files in the
  ordinary staging copy, so no one tree serves a whole cycle: crawl and the
  daemon hold the crawl_dir's ``crawl.lock`` and stage each step as its own
  command, which leases, pulls and publishes for itself.

A step's arguments are a small frozen dataclass (``FetchArgs``...); what staging
makes of them (segments in its tree, partitions leased) comes back as a new one
in ``Staged.args``: nothing is rewritten in place.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from crawler.config import CrawlerConfig
from crawler.crawldir import Remote, parse_remote
from crawler.log import get_logger
from crawler.segments.layout import Segment
from crawler.storage.access import ACCESS, Access

A = TypeVar("A")


@dataclass(frozen=True, slots=True)
class NoArgs:
    """A step that names no segment (inject, dedup, reading what is left to finish)."""


@dataclass(frozen=True, slots=True)
class GenerateArgs:
    top_n: int | None = None
    partitions: int | None = None


@dataclass(frozen=True, slots=True)
class FetchArgs:
    segment: str  # a name, or a path
    partition: list[int] | None = None  # None: every partition (staged by step: those leased)
    spark: bool = False  # each partition a Spark task, which stages it itself (the driver pulls the fetchlist)


@dataclass(frozen=True, slots=True)
class SegmentsArgs:
    """updatedb's and invertlinks' segments (names or paths)."""

    segments: list[str]


@dataclass(frozen=True, slots=True)
class Staged(Generic[A]):
    """A command or step as staged: the config to run it with (its ``crawl_path`` is where its files are), and
    its arguments with segment paths in that tree and, for a fetch, the partitions it leased."""

    cfg: CrawlerConfig
    args: A


def _with_values(args: A, values: dict[str, Any]) -> A:
    if not values:
        return args
    if isinstance(args, argparse.Namespace):  # a command's own arguments, from the CLI
        return argparse.Namespace(**{**vars(args), **values})  # type: ignore[return-value]
    return dataclasses.replace(args, **values)  # type: ignore[type-var]


class Workspace:
    """A local crawl_dir: the crawl lives where the jobs work, so every step runs on the tree as it is."""

    # Whether the local tree shows what another command writes (a new webdb version), so an idle daemon can look.
    sees_changes = True

    @contextmanager
    def command(self, cfg: CrawlerConfig, args: A, access: Access | None) -> Iterator[Staged[A]]:
        """A whole command (the CLI's), with ``access`` its ACCESS entry."""
        yield Staged(cfg, args)

    @contextmanager
    def step(self, cfg: CrawlerConfig, command: str | Access, args: A) -> Iterator[Staged[A]]:
        """One step of crawl or the daemon, ``command`` a CLI command's name or an Access of its own."""
        yield Staged(cfg, args)

    def state_path(self, cfg: CrawlerConfig) -> Path:
        """The crawl folder the steps that read the stores work in (the daemon's seed memory lives there)."""
        return cfg.crawl_path

    def fetch_complete(self, segment: Segment, stopped: bool | None) -> bool:
        """Whether a fetch ended complete; ``stopped``: its report's (None: an earlier run fetched it)."""
        return segment.fetched

    def end_round(self, cfg: CrawlerConfig) -> None:
        """Call after each round of crawl or daemon cycle: a bucket gets each as it completes."""

    def prune(self, cfg: CrawlerConfig, merged: list[str], log: Any) -> list[str]:
        """``daemon.keep_segments`` where the crawl lives beyond the local tree; the segments pruned there."""
        return []


class BucketWorkspace(Workspace):
    """An ``s3://`` crawl_dir with DuckDB jobs: a command works in the staging copy, pulled and published."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote

    @contextmanager
    def command(self, cfg: CrawlerConfig, args: A, access: Access | None) -> Iterator[Staged[A]]:
        if access is None:  # the checkers: they touch no crawl_dir
            yield Staged(cfg, args)
            return
        from crawler.storage.session import Session

        with Session(cfg, self.remote, access, get_logger(component="storage")).run(args) as values:
            yield Staged(cfg, _with_values(args, values))

    def end_round(self, cfg: CrawlerConfig) -> None:
        from crawler.storage.session import publish_round

        publish_round(cfg)

    def prune(self, cfg: CrawlerConfig, merged: list[str], log: Any) -> list[str]:
        from crawler.storage.retention import prune_remote_segments

        return prune_remote_segments(cfg, merged, log)


class SteppedWorkspace(BucketWorkspace):
    """Spark jobs over a bucket: each step of crawl and the daemon staged as its own command would be."""

    # The stores live in the bucket, not in a tree this process keeps: an idle daemon generates once per idle_sleep.
    sees_changes = False

    @contextmanager
    def command(self, cfg: CrawlerConfig, args: A, access: Access | None) -> Iterator[Staged[A]]:
        from crawler.storage.session import crawl_lease, staged_by_reference

        if access is not None and access.by_step:
            # One crawl or daemon per crawl_dir: it holds no store's lease between steps, and a second one would
            # resume (fetch, merge) the segment the first is working on.
            with crawl_lease(cfg, self.remote):
                yield Staged(cfg, args)
        elif access is not None and access.engine_io:
            with staged_by_reference(cfg, self.remote, access, args) as (run_cfg, values):
                yield Staged(run_cfg, _with_values(args, values))
        else:
            with super().command(cfg, args, access) as staged:
                yield staged

    @contextmanager
    def step(self, cfg: CrawlerConfig, command: str | Access, args: A) -> Iterator[Staged[A]]:
        with self.command(cfg, args, ACCESS[command] if isinstance(command, str) else command) as staged:
            yield staged

    def state_path(self, cfg: CrawlerConfig) -> Path:
        from crawler.storage.session import reference_config

        return reference_config(cfg).crawl_path

    def fetch_complete(self, segment: Segment, stopped: bool | None) -> bool:
        # The fetch step's staging copy may be gone once published: updatedb checks the bucket's marker instead.
        return not stopped

    def end_round(self, cfg: CrawlerConfig) -> None:
        pass  # every step has published


def open_workspace(cfg: CrawlerConfig) -> Workspace:
    """The workspace of ``cfg.crawl_dir``; chosen once per command (a SIGHUP cannot move the crawl_dir)."""
    remote = parse_remote(cfg.crawl_dir)
    if remote is None:
        return Workspace()
    return SteppedWorkspace(remote) if cfg.jobs.engine == "spark" else BucketWorkspace(remote)
