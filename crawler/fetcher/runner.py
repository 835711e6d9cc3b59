"""Run a segment's fetch from the command line: signals, and ``fetcher.processes`` fetch processes.

SIGINT or SIGTERM sets the fetcher's stop event: it stops taking entries,
commits what it has, and leaves the partitions unfinished, so running the same
command again resumes. A second signal ends the process at once.

With ``fetcher.processes`` above 1 the partitions are shared out among that
many processes (a host lives in exactly one partition, so it is never split),
each an asyncio fetcher of its own: fetching, parsing and writing use every
core. The parent only starts them, passes signals on, and waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import signal
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import uvloop

from crawler.config import CrawlerConfig
from crawler.errors import CrawlerError
from crawler.fetcher import forkserver
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.robots import Remembered
from crawler.fetcher.service import FetchReport, fetch_segment
from crawler.log import configure_logging, get_logger
from crawler.memory import collect_for_pages
from crawler.segments.layout import Segment

_STOPPED = 3  # a child's exit code when a signal stopped it


class _GcScope:
    """The fetches running in this process. Overlapping fetches (the daemon's) share one scope: the heap is
    frozen when the first starts and given back when the last ends. Freezing again at each start would keep
    what the others made since (garbage later, cycles among it) out of every collection until the last
    ended, and the first to end would put the defaults back under the others. So what stays frozen is at
    most the heap as it was when the scope opened, however long fetches keep overlapping."""

    def __init__(self) -> None:
        self.fetches = 0
        self.threshold = gc.get_threshold()

    def enter(self) -> None:
        self.fetches += 1
        if self.fetches == 1:
            self.threshold = gc.get_threshold()
            collect_for_pages()  # imports, config, caches: never garbage during the fetch

    def exit(self) -> None:
        self.fetches -= 1
        if self.fetches == 0:
            gc.set_threshold(*self.threshold)
            # The fetches' garbage is collected while what was frozen at their start still is: a collection
            # of what they made, where one after the unfreeze went through the whole heap (imports, config,
            # the webdb jobs' modules: ~120k objects, 50-70 ms at the end of each round of `crawl`).
            gc.collect()
            gc.unfreeze()


_SCOPE = _GcScope()  # process-wide, as the collector it tunes


@contextlib.contextmanager
def fetch_gc() -> Iterator[None]:
    """Cheaper garbage collection for a fetch: what exists at its start is frozen, collections are rarer.

    Everything is put back when the last running fetch ends (a cycle frozen here is collected later as
    usual), so `crawl`'s jobs between rounds see the defaults; the daemon's jobs, which run beside its
    fetches, share the fetches' settings while any runs.
    """
    _SCOPE.enter()
    try:
        yield
    finally:
        _SCOPE.exit()


async def _fetch_until_signal(cfg: CrawlerConfig, segment: Segment, partitions: list[int] | None,
                              parse_pool: ParsePool | None = None, robots_memory: Remembered | None = None,
                              start_pool: Callable[[], ParsePool] | None = None) -> FetchReport:
    log = get_logger(command="fetch")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        log.warning("fetch.signal", signal=signal.Signals(signum).name, action="commit and stop; rerun to resume")
        stop.set()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)  # a second signal takes the default action: exit now

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await fetch_segment(cfg, segment, log, partitions, stop=stop, parse_pool=parse_pool,
                                   robots_memory=robots_memory, start_pool=start_pool)
    finally:
        # Back to the default actions: `crawl` runs its jobs between fetches without an event loop,
        # and a handler left behind by this closed loop would swallow a SIGTERM sent then.
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _child(cfg: CrawlerConfig, segment_path: str, partitions: list[int]) -> None:
    # Ctrl-C reaches the whole process group; the parent alone decides and passes SIGTERM on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_logging(cfg.log)
    segment = Segment(Path(segment_path))
    with RoundsPool(cfg, "fetch") as own, fetch_gc():
        pool = own.for_fetch(segment, partitions)
        report = uvloop.run(_fetch_until_signal(cfg, segment, partitions, pool, start_pool=own.later(segment)))
    raise SystemExit(_STOPPED if report.stopped else 0)


def shares(partitions: list[int], processes: int) -> list[list[int]]:
    """Partitions dealt round-robin to at most ``processes`` groups, none empty."""
    count = max(1, min(processes, len(partitions)))
    return [partitions[i::count] for i in range(count)]


def wants_pool(cfg: CrawlerConfig, segment: Segment, partitions: list[int] | None = None) -> bool:
    """Whether a fetch of ``segment`` (its ``partitions``) parses in a pool: configured, and with
    ``fetcher.parse_pool_min_entries`` entries or more to fetch (enough to pay for the pool's start)."""
    if not forkserver.wanted(cfg):
        return False
    present = set(segment.fetchlist_partitions())
    chosen = present if partitions is None else present.intersection(partitions)
    entries = sum(pq.read_metadata(segment.fetchlist_part(p)).num_rows for p in chosen)
    return entries >= cfg.fetcher.parse_pool_min_entries


class RoundsPool:
    """A parse pool started by the first fetch that wants one (``wants_pool``), or by a fetch that grows past
    ``fetcher.parse_pool_min_entries`` pages as it follows outlinks (``start``). ``crawl`` ends it after each
    fetch (``release``), and each later fetch that wants one starts its own, forked from a new fork server."""

    def __init__(self, cfg: CrawlerConfig, command: str = "crawl") -> None:
        self.cfg = cfg
        self.command = command
        self.pool: ParsePool | None = None
        self.usable = forkserver.wanted(cfg)
        # The pool's fork server, if the command has not started it already (forkserver.py): whoever
        # started it stops it.
        self._server = forkserver.warm_up() if self.usable else False

    def for_fetch(self, segment: Segment, partitions: list[int] | None) -> ParsePool | None:
        if self.pool is None and wants_pool(self.cfg, segment, partitions):
            self.start(segment.name)
        return self.pool

    def start(self, segment: str) -> ParsePool:
        if self.pool is None:
            self._server = forkserver.warm_up() or self._server  # again, if ``release`` stopped it
            self.pool = ParsePool(self.cfg, self.cfg.fetcher.parse_processes)
            # crawl's event since the pool was crawl's alone; a fetch's own says when it started, and
            # fetch.parse_pool (responses.py) when it took the pages over.
            event = "crawl.parse_pool" if self.command == "crawl" else "fetch.pool_started"
            get_logger(command=self.command).info(event, processes=self.pool.processes, segment=segment)
        return self.pool

    def release(self) -> None:
        """End the pool between fetches (its fork server ended once the pool's processes were forked, or ends
        now where it could not): a fetch that wants a pool starts them anew.

        ``crawl`` calls it after each fetch. The pool's processes hold what their last pages left (each parse
        process ~55 MB) through updatedb, invertlinks and generate, whose DuckDB memory peaks in this process
        meanwhile: that sum was the crawl's peak, and so was the server (~24 MB) while the pool's processes
        were gone (docs/benchmarks.md, "The part writer joins the fetch process"). The next round's pool
        waits for the new server's imports (~0.3 s on another core; pages queue in its pipes).
        """
        if self.pool is not None:
            self.pool.close()
            self.pool = None
            forkserver.stop()

    def later(self, segment: Segment) -> Callable[[], ParsePool] | None:
        """What a fetch calls to start the pool when it has grown large enough; None if there is one."""
        return partial(self.start, segment.name) if self.pool is None and self.usable else None

    def __enter__(self) -> RoundsPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        if self._server:
            forkserver.stop()


def run_fetch(cfg: CrawlerConfig, segment: Segment, partitions: list[int] | None = None,
              parse_pool: ParsePool | None = None, robots_memory: Remembered | None = None,
              start_pool: Callable[[], ParsePool] | None = None) -> None:
    """Fetch ``segment`` (all partitions, or the given ones); raises CrawlerError if a signal stopped it.

    ``parse_pool`` and ``robots_memory`` (the settled robots.txt answers ``crawl`` carries from round to
    round) are used when the fetch runs in this process; fetch processes have their own. ``start_pool``
    (with no ``parse_pool``): how the fetch gets one if it grows large (``crawl``'s);
    without either, the fetch starts its own as it needs, and closes it when it ends.
    """
    chosen = partitions if partitions is not None else segment.fetchlist_partitions()
    groups = shares(chosen, cfg.fetcher.processes)
    if len(groups) <= 1:
        # Not crawl's: a pool of this fetch's own, if any. Made only then: its warm-up would start a fork server
        # again beside crawl's pool, whose server ended once the pool's processes were forked.
        own = RoundsPool(cfg, "fetch") if parse_pool is None and start_pool is None else None
        with own or contextlib.nullcontext(), fetch_gc():
            if own is not None:
                parse_pool = own.for_fetch(segment, partitions)
                start_pool = own.later(segment)
            report = uvloop.run(_fetch_until_signal(cfg, segment, partitions, parse_pool, robots_memory,
                                                    start_pool))
        stopped = report.stopped
    else:
        stopped = _run_processes(cfg, segment, groups)
    if stopped:
        raise CrawlerError(f"fetch of {segment.path} stopped by a signal; run it again to resume")


def _run_processes(cfg: CrawlerConfig, segment: Segment, groups: list[list[int]]) -> bool:
    context = multiprocessing.get_context("spawn")
    children = [context.Process(target=_child, args=(cfg, str(segment.path), group), daemon=False)
                for group in groups]
    signalled = []

    def forward(signum: int, _frame: Any) -> None:
        signalled.append(signum)
        for child in children:
            if child.pid is not None and child.exitcode is None:
                child.terminate()  # SIGTERM: the child commits and stops

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for child in children:
            child.start()
        for child in children:
            child.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    codes = [child.exitcode for child in children]
    if any(code not in (0, _STOPPED) for code in codes):
        raise CrawlerError(f"fetch of {segment.path}: a fetch process failed (exit codes {codes}); "
                           "run it again to resume")
    return bool(signalled) or _STOPPED in codes
