"""Fetcher test helpers: inline aiohttp servers on 127.x addresses, segments made from URL lists, rows read back."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import structlog
from aiohttp import web

from crawler.config import CrawlerConfig, load_config
from crawler.fetcher.parsepool import ParsePool
from crawler.fetcher.service import FetchReport, fetch_segment
from crawler.models import FETCHLIST
from crawler.segments.layout import Segment, part_name, partition_of
from crawler.urls.normalize import host_of

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Hit:
    path: str
    started: float
    finished: float = 0.0


@dataclass
class Server:
    """One inline aiohttp app on one loopback address; records every request's start and end."""

    host: str
    routes: dict[str, Handler]
    hits: list[Hit] = field(default_factory=list)
    port: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def paths(self) -> list[str]:
        return [h.path for h in self.hits]

    async def start(self) -> None:
        async def handle(request: web.Request) -> web.StreamResponse:
            hit = Hit(request.path_qs, time.monotonic())
            self.hits.append(hit)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                handler = self.routes.get(request.path)
                if handler is None:
                    return web.Response(status=404, text="not found")
                return await handler(request)
            finally:
                self.in_flight -= 1
                hit.finished = time.monotonic()

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, self.port)
        await site.start()
        self.port = self.runner.addresses[0][1]


def page(body: str = "<html><head><title>t</title></head><body>hello</body></html>", **kw: Any) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body, content_type="text/html", **kw)

    return handler


def redirect(location: str, status: int = 301) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return handler


def robots(text: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=text, content_type="text/plain")

    return handler


@pytest.fixture
async def servers():
    """Start servers: ``await servers("127.0.0.2", {"/": handler})``; all stopped after the test."""
    started: list[Server] = []

    async def start(host: str = "127.0.0.1", routes: dict[str, Handler] | None = None) -> Server:
        server = Server(host, dict(routes or {}))
        await server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        if server.runner is not None:
            await server.runner.cleanup()


def make_segment(root: Path, urls: list[str], partitions: int = 1) -> Segment:
    seg = Segment(root / "segments" / "20260101T000000000Z")
    by_part: dict[int, list[dict[str, Any]]] = {p: [] for p in range(partitions)}
    for url in urls:
        host = host_of(url)
        p = partition_of(host, partitions)
        by_part[p].append({"url": url, "host": host, "partition": p, "score": 1.0,
                           "db_status": "unfetched", "retries": 0})
    (seg.dir("fetchlist")).mkdir(parents=True, exist_ok=True)
    for p, rows in by_part.items():
        pq.write_table(pa.Table.from_pylist(rows, schema=FETCHLIST), seg.dir("fetchlist") / part_name(p))
    seg.mark_done("fetchlist")
    return seg


def make_cfg(tmp_path: Path, *overrides: str) -> CrawlerConfig:
    base = [f"crawl_dir={tmp_path}", "http.allow_private_networks=true", "fetcher.min_delay=0",
            "fetcher.concurrency=8", "fetcher.progress_interval=60"]
    return load_config(None, [*base, *overrides])


async def fetch(tmp_path: Path, urls: list[str], *overrides: str, partitions: int = 1,
                stop: asyncio.Event | None = None,
                pool_processes: int = 0) -> tuple[FetchReport, dict[str, dict[str, Any]], list[dict]]:
    """Fetch a segment of ``urls`` (parsed in a pool of ``pool_processes`` if any); returns the report, fetcher
    rows by URL, and the captured log events."""
    cfg = make_cfg(tmp_path, *overrides)
    seg = make_segment(tmp_path, urls, partitions)
    with ParsePool(cfg, pool_processes) if pool_processes else contextlib.nullcontext() as pool, \
            structlog.testing.capture_logs() as logs:
        report = await fetch_segment(cfg, seg, structlog.get_logger(), stop=stop, parse_pool=pool)
    return report, rows_by_url(seg), logs


def read_rows(seg: Segment, output: str = "fetcher") -> list[dict[str, Any]]:
    parts = seg.parts(output)
    if not parts:
        return []
    return pa.concat_tables([pq.read_table(p) for p in parts], promote_options="default").to_pylist()


def rows_by_url(seg: Segment) -> dict[str, dict[str, Any]]:
    rows = read_rows(seg)
    by_url = {r["url"]: r for r in rows}
    assert len(by_url) == len(rows), "a URL was recorded twice"
    return by_url
