"""The daemon's lifecycle: startup -> run_until(stop) -> shutdown(grace), as uvicorn does it.

Signals only set state: SIGTERM/SIGINT set the stop event (the fetches stop
taking entries, finish what is in flight, commit their writers; the cycle ends
between two phases); a second one exits at once. Exiting at once is safe
because every writer writes under a temporary name and renames when complete:
a cut leaves only temp files, which the next start removes. SIGHUP reloads the
config (see ``reload.py``) and wakes an idle daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.daemon.endpoint import Endpoint
from crawler.daemon.livelog import LiveLogger
from crawler.daemon.loop import CrawlLoop
from crawler.daemon.reload import ConfigSource
from crawler.daemon.status import DaemonStatus
from crawler.errors import ConfigError, CrawlerError
from crawler.log import configure_logging
from crawler.metrics import Metrics

LOCK_FILE = ".daemon.lock"


@contextlib.contextmanager
def daemon_lock(crawl_dir: Path) -> Iterator[None]:
    """One daemon per crawl_dir: it removes temp files at start, which would break a second one's writes."""
    crawl_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(crawl_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise CrawlerError(f"{crawl_dir}: another daemon is running on it (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


class Service:
    def __init__(self, source: ConfigSource) -> None:
        self.source = source
        self.log = LiveLogger()
        self.metrics = Metrics()
        self.status = DaemonStatus()
        self.endpoint = Endpoint(self.metrics, self.status)
        self.stop = asyncio.Event()
        self.crawl: CrawlLoop | None = None
        self.forced = False

    @property
    def cfg(self) -> CrawlerConfig:
        return self.source.current

    async def serve(self) -> int:
        with daemon_lock(self.cfg.crawl_path):
            await self.startup()
            try:
                await self.run_until(self.stop)
            finally:
                await self.shutdown()
        if self.forced:
            # A job thread may still be running; its output is temp files only. Do not wait for it.
            os._exit(0)
        return 0

    async def startup(self) -> None:
        cfg = self.cfg
        self.log.info("daemon.start", pid=os.getpid(), crawl_dir=str(cfg.crawl_path.resolve()),
                      seeds=cfg.daemon.seeds, config=str(self.source.path or "./config.yaml"))
        if cfg.metrics.listen:
            host, port = await self.endpoint.start(cfg.metrics.listen)
            self.log.info("metrics.listening", host=host, port=port, url=f"http://{host}:{port}/metrics")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_stop_signal, sig)
        loop.add_signal_handler(signal.SIGHUP, self._on_reload_signal)
        self.crawl = CrawlLoop(lambda: self.cfg, self.metrics, self.status, self.stop, self.log)

    async def run_until(self, stop: asyncio.Event) -> None:
        assert self.crawl is not None
        crawl = asyncio.create_task(self.crawl.run())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({crawl, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not crawl.done():
            await self._drain(crawl)
        if not crawl.cancelled():
            crawl.result()  # a crash of the loop itself (not of one cycle) ends the command with its error

    async def _drain(self, crawl: asyncio.Task[None]) -> None:
        grace = self.cfg.daemon.shutdown_timeout
        done, _ = await asyncio.wait({crawl}, timeout=grace)
        if done:
            return
        assert self.crawl is not None
        self.log.warning("daemon.shutdown_timeout", grace_s=grace, phase=self.status.phase,
                         cut=sorted(self.crawl.running))
        self.forced = True
        self.crawl.cancel_fetches()
        crawl.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await crawl

    async def shutdown(self) -> None:
        self.status.phase = "stopped"
        await self.endpoint.stop()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        self.log.info("daemon.stopped", forced=self.forced, fetched=self.status.fetched_total)

    def _on_stop_signal(self, sig: signal.Signals) -> None:
        if self.stop.is_set():
            self.log.warning("daemon.exit_now", signal=sig.name)
            os._exit(128 + sig)
        self.log.info("daemon.stopping", signal=sig.name, grace_s=self.cfg.daemon.shutdown_timeout)
        self.stop.set()

    def _on_reload_signal(self) -> None:
        try:
            reload = self.source.reload()
        except ConfigError as exc:
            self.metrics.config_reloads.labels("invalid").inc()
            self.log.error("config.reload_failed", error=str(exc), kept="the running config")
            return
        self.metrics.config_reloads.labels("ok").inc()
        if self.crawl is not None:
            self.crawl.wake.changed("reload")  # generate.* may have changed what is selected
        new = reload.config
        now: list[str] = []
        if reload.keys("log") or new.log.file:
            # Also with log.file unchanged: reopening it lets a rotated file go (as nginx does on a signal).
            try:
                configure_logging(new.log)
            except ConfigError as exc:
                self.log.error("config.log_failed", error=str(exc), kept="the previous log settings")
            else:
                now += reload.keys("log")
        fetcher_keys = reload.keys("fetcher")
        if self.crawl is not None and self.crawl.reconfigure(reload) and fetcher_keys:
            now += fetcher_keys
        later = [k for k in reload.changed if k not in now]
        event: dict[str, Any] = {"changed": reload.changed, "applied_now": now, "next_cycle": later,
                                 "restart_required": reload.restart_required}
        self.log.info("config.reloaded", **event)
        for key in reload.restart_required:
            self.log.warning("config.restart_required", key=key, reason="kept the old value until a restart")
