"""Parse pages and write segment parts in worker processes, off the fetch process (``fetcher.parse_processes``).

Parsing and encoding the parts (WARC gzip and digests, Parquet) are the CPU
cost of a page besides HTTP itself (DESIGN 3): done in the fetch process they
serialise with fetching on one core. A ParsePool keeps
``fetcher.parse_processes`` parse processes and one writer process alive
(``crawler crawl`` keeps one pool for all its rounds, so the ~0.5 s start of a
process is paid once). The writer is separate so that a part being written
(up to ``fetcher.commit_records`` records) never holds up the pages waiting to
be parsed. Each
worker builds its own ParserDispatch from the config; the fetcher sends the
body, URL and content type, and gets the segment rows back (plain dicts and
lists, cheap to pickle), exactly what ``parse_rows`` gives in-process.

Calls are batched: pages that arrive while a batch is in flight go out
together in the next one, so the per-call IPC cost is shared when pages come
fast and no page waits for a batch to fill when they come slowly.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from crawler.config import CrawlerConfig
from crawler.fetcher.records import parse_rows
from crawler.parsers.dispatch import ParserDispatch

Rows = tuple[dict[str, Any], dict[str, Any], str]  # parse_text row, parse_data row, parse status

T = TypeVar("T")
_MAX_BATCH = 32
_dispatch: ParserDispatch | None = None  # one per worker process


def _init_worker(cfg: CrawlerConfig) -> None:
    global _dispatch
    _dispatch = ParserDispatch(cfg)


def _ready() -> bool:
    return _dispatch is not None


def parse_to_rows(dispatch: ParserDispatch, body: bytes, url: str, content_type: str | None) -> Rows:
    parsed = dispatch.parse(body, url, content_type)
    parse_text, parse_data = parse_rows(url, parsed)
    return parse_text, parse_data, parsed.status


def _parse_batch(items: list[tuple[bytes, str, str | None]]) -> list[Rows]:
    assert _dispatch is not None
    return [parse_to_rows(_dispatch, body, url, ctype) for body, url, ctype in items]


class ParsePool:
    """Worker processes that parse; ``await pool.parse(...)`` from any event loop, ``close()`` when done."""

    def __init__(self, cfg: CrawlerConfig, processes: int) -> None:
        self.processes = processes
        self._executor = ProcessPoolExecutor(
            processes, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker, initargs=(cfg,)
        )
        self._writer = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        # Start every worker now (they import and build their parsers while the caller does other work).
        self._warm = [self._executor.submit(_ready) for _ in range(processes)] + [self._writer.submit(_ready)]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[tuple[bytes, str, str | None], asyncio.Future[Rows]]] = []
        self._in_flight = 0

    async def parse(self, body: bytes, url: str, content_type: str | None) -> Rows:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new round of `crawl` runs a new event loop
            self._loop, self._pending, self._in_flight = loop, [], 0
        future: asyncio.Future[Rows] = loop.create_future()
        self._pending.append(((body, url, content_type), future))
        if self._in_flight < self.processes:
            self._send()
        return await future

    def _send(self) -> None:
        batch, self._pending = self._pending[:_MAX_BATCH], self._pending[_MAX_BATCH:]
        if not batch:
            return
        assert self._loop is not None
        self._in_flight += 1
        call = self._loop.run_in_executor(self._executor, _parse_batch, [item for item, _ in batch])
        call.add_done_callback(lambda done: self._finished(done, [f for _, f in batch]))

    def _finished(self, done: asyncio.Future[list[Rows]], futures: list[asyncio.Future[Rows]]) -> None:
        self._in_flight -= 1
        exc = None if done.cancelled() else done.exception()
        for i, future in enumerate(futures):
            if future.done():
                continue
            if done.cancelled():
                future.cancel()
            elif exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(done.result()[i])
        while self._pending and self._in_flight < self.processes:
            self._send()

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` (picklable) in the writer process."""
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._writer.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
