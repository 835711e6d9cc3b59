"""The fetch service: progress events, per-URL events, the watchdog, live reconfiguration, queue by IP."""

from __future__ import annotations

import asyncio

import structlog
from aiohttp import web

from crawler.fetcher.events import FetchDone, FetchProgress
from crawler.fetcher.progress import Counters, ProgressReporter
from crawler.fetcher.service import Fetcher
from tests.fetcher.conftest import fetch, make_cfg, make_segment, page


class Recorder:
    def __init__(self) -> None:
        self.done: list[FetchDone] = []
        self.progresses: list[FetchProgress] = []

    def fetch_done(self, event: FetchDone) -> None:
        self.done.append(event)

    def progress(self, event: FetchProgress) -> None:
        self.progresses.append(event)


def _slow(seconds: float):
    async def handler(request):
        await asyncio.sleep(seconds)
        return web.Response(text="<html>slow</html>", content_type="text/html")

    return handler


class TestEvents:
    async def test_progress_reports_errors_by_kind(self, tmp_path, servers):
        """fetch.progress comes every progress_interval with pages/s, queue figures and errors by kind."""
        async def reset(request):
            request.transport.abort()
            await asyncio.sleep(0)
            return web.Response()

        site = await servers("127.0.0.1", {f"/p{i}": _slow(0.1) for i in range(5)})
        broken = await servers("127.0.0.2", {"/reset": reset})
        urls = [site.url(f"/p{i}") for i in range(5)] + [broken.url("/reset")]
        _, _, logs = await fetch(tmp_path, urls, "fetcher.progress_interval=0.1")
        progress = [e for e in logs if e["event"] == "fetch.progress"]
        assert progress
        assert {"pages_per_second", "bytes_per_second", "in_flight", "queued", "active_hosts",
                "errors", "waiting_hosts", "stuck"} <= set(progress[-1])
        assert progress[-1]["errors"] == {"connect": 1}
        done = next(e for e in logs if e["event"] == "fetch.done")
        assert done["errors"] == {"connect": 1}

    async def test_every_url_has_a_debug_event_and_an_observer_event(self, tmp_path, servers):
        """Each recorded URL yields fetch.url (debug: url, host, status, bytes, elapsed_ms) and a FetchDone."""
        site = await servers("127.0.0.1", {"/a": page(), "/b": page()})
        cfg = make_cfg(tmp_path)
        seg = make_segment(tmp_path, [site.url("/a"), site.url("/b"), site.url("/c")])
        recorder = Recorder()
        with structlog.testing.capture_logs() as logs:
            await Fetcher(cfg, seg, structlog.get_logger(), observer=recorder).run()
        per_url = {e["url"]: e for e in logs if e["event"] == "fetch.url"}
        assert set(per_url) == {site.url("/a"), site.url("/b"), site.url("/c")}
        assert per_url[site.url("/a")]["log_level"] == "debug"
        assert {"host", "status", "bytes", "elapsed_ms"} <= set(per_url[site.url("/a")])
        assert sorted((e.url, e.status) for e in recorder.done) == [
            (site.url("/a"), "success"), (site.url("/b"), "success"), (site.url("/c"), "gone")]


class TestWatchdog:
    def test_stuck_requests_are_logged_once_and_counted(self):
        """A request in flight past stuck_after is logged once as fetch.stuck; a recent one is not."""
        counters = Counters(in_flight={1: ("http://a.test/old", 0.0), 2: ("http://b.test/new", 95.0)})
        reporter = ProgressReporter("seg", counters, lambda: (2, 0, 2, 0), interval=1, stuck_after=60, total=0,
                                    log=structlog.get_logger(), observer=Recorder(), bar=False)
        with structlog.testing.capture_logs() as logs:
            assert reporter.watch(100.0) == 1
            assert reporter.watch(101.0) == 1
        assert [(e["event"], e["url"]) for e in logs] == [("fetch.stuck", "http://a.test/old")]


    async def test_watchdog_after_sets_the_threshold(self, tmp_path, servers):
        """fetcher.watchdog_after replaces the derived threshold: a 0.8 s request past 0.3 s is logged as stuck."""
        site = await servers("127.0.0.1", {"/slow": _slow(0.8)})
        _, rows, logs = await fetch(tmp_path, [site.url("/slow")], "fetcher.watchdog_after=0.3",
                                    "fetcher.progress_interval=0.1")
        assert rows[site.url("/slow")]["status"] == "success"
        assert [e["url"] for e in logs if e["event"] == "fetch.stuck"] == [site.url("/slow")]

    async def test_watchdog_default_is_derived_from_the_timeout(self, tmp_path, servers):
        """watchdog_after 0 (the default): 2 x http.timeout.total + 5 s, so a 0.8 s request is not stuck."""
        site = await servers("127.0.0.1", {"/slow": _slow(0.8)})
        _, _, logs = await fetch(tmp_path, [site.url("/slow")], "fetcher.progress_interval=0.1")
        assert not [e for e in logs if e["event"] == "fetch.stuck"]


class TestReconfigure:
    async def test_concurrency_raised_live(self, tmp_path, servers):
        """reconfigure() with higher per-host concurrency lets more requests to one host run at once, mid-fetch."""
        first = asyncio.Event()

        async def handler(request):
            first.set()
            await asyncio.sleep(0.1)
            return web.Response(text="<html>x</html>", content_type="text/html")

        site = await servers("127.0.0.1", {f"/p{i}": handler for i in range(12)})
        cfg = make_cfg(tmp_path, "fetcher.concurrency=1")
        seg = make_segment(tmp_path, [site.url(f"/p{i}") for i in range(12)])
        fetcher = Fetcher(cfg, seg, structlog.get_logger())
        run = asyncio.create_task(fetcher.run())
        await first.wait()
        assert site.max_in_flight == 1
        fetcher.reconfigure(cfg.fetcher.model_copy(update={"concurrency": 4, "per_host_concurrency": 4}))
        report = await run
        assert report.by_status == {"success": 12}
        assert site.max_in_flight == 4


class TestQueueByIp:
    async def test_names_on_one_address_share_a_queue(self, tmp_path, servers):
        """queue_mode ip: two names pinned to one address never have requests in flight at the same time."""
        site = await servers("127.0.0.2", {f"/p{i}": _slow(0.05) for i in range(4)})
        urls = [f"http://{name}:{site.port}/p{i}" for name in ("one.test", "two.test") for i in range(4)]
        _, rows, _ = await fetch(tmp_path, urls, "fetcher.queue_mode=ip",
                                 "http.resolve={one.test: 127.0.0.2, two.test: 127.0.0.2}")
        assert {r["status"] for r in rows.values()} == {"success"}
        assert site.max_in_flight == 1
