"""The daemon as a real subprocess, and small multi-host sites served on 127.0.0.x."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from crawler.devserver import SiteServer
from tests.procs import kill_child, signal_child

EVENT_TIMEOUT = 30.0  # generous: other engineers run suites on this 2-core machine at the same time


def write_site(root: Path, pages: int, links: list[str] = ()) -> Path:
    """index.html linking to ``pages`` pages (and to ``links``), plus a robots.txt allowing everything."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    anchors = [f'<a href="/p{i}.html">page {i}</a>' for i in range(pages)]
    anchors += [f'<a href="{url}">elsewhere</a>' for url in links]
    (root / "index.html").write_text(f"<html><head><title>index</title></head><body>{''.join(anchors)}</body></html>")
    for i in range(pages):
        (root / f"p{i}.html").write_text(f"<html><head><title>page {i}</title></head><body>page {i}</body></html>")
    return root


class DaemonProcess:
    """``crawler daemon`` in a subprocess whose JSON log lines are collected as they arrive."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.events: list[dict[str, Any]] = []
        self.other_lines: list[str] = []
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, *args: str, cwd: Path) -> DaemonProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawler", "daemon", *args, cwd=cwd, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            limit=1 << 22,
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            async with self._changed:
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    self.other_lines.append(line)
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    def find(self, event: str, **fields: Any) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == event and all(e.get(k) == v for k, v in fields.items())]

    async def wait_for(self, predicate: Callable[[list[dict[str, Any]]], Any], what: str,
                       timeout: float = EVENT_TIMEOUT) -> Any:
        """Wait until ``predicate(events)`` is truthy; fail naming ``what`` and the log tail otherwise."""
        async def until() -> Any:
            async with self._changed:
                while True:
                    found = predicate(self.events)
                    if found:
                        return found
                    if self._reader.done():
                        raise AssertionError(f"daemon exited while waiting for {what}: {self.tail()}")
                    await self._changed.wait()
        try:
            return await asyncio.wait_for(until(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}: {self.tail()}") from None

    async def wait_event(self, event: str, after: int = 0, **fields: Any) -> dict[str, Any]:
        """The first ``event`` (with those fields) logged after the first ``after`` lines."""
        def match(events: list[dict[str, Any]]) -> dict[str, Any] | None:
            for e in events[after:]:
                if e.get("event") == event and all(e.get(k) == v for k, v in fields.items()):
                    return e
            return None
        return await self.wait_for(match, f"{event} {fields or ''}")

    async def port(self) -> int:
        return (await self.wait_event("metrics.listening"))["port"]

    def signal(self, sig: signal.Signals) -> None:
        signal_child(self.proc, sig)

    async def wait_exit(self, timeout: float = EVENT_TIMEOUT) -> int:
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"daemon did not exit within {timeout}s: {self.tail()}") from None
        await self._reader
        return code

    def tail(self, n: int = 15) -> str:
        return "\n".join([json.dumps(e) for e in self.events[-n:]] + self.other_lines[-5:])

    async def kill(self) -> None:
        if self.proc.returncode is None:
            kill_child(self.proc)
            await self.proc.wait()
        with contextlib.suppress(Exception):
            await self._reader


async def http_get(port: int, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


@pytest.fixture
async def start_daemon():
    """Start daemons; any still running at the end of the test is killed."""
    started: list[DaemonProcess] = []

    async def start(*args: str, cwd: Path) -> DaemonProcess:
        daemon = await DaemonProcess.start(*args, cwd=cwd)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        await daemon.kill()


@pytest.fixture
async def three_hosts(tmp_path):
    """Three hosts (127.0.0.1, .2, .3) of 6 pages each; a's index links to b, c links nowhere else."""
    roots = [tmp_path / f"site-{name}" for name in "abc"]
    servers = [SiteServer(root, host, 0) for root, host in zip(roots, ("127.0.0.1", "127.0.0.2", "127.0.0.3"),
                                                                strict=True)]
    for root, server in zip(roots, servers, strict=True):
        root.mkdir()
        await server.start()
    a, b, c = servers
    write_site(roots[0], 6, [b.url("/")])
    write_site(roots[1], 6)
    write_site(roots[2], 6)
    yield servers
    for server in servers:
        await server.stop()


def daemon_args(tmp_path: Path, *extra: str) -> list[str]:
    """A config file of fast defaults for loopback servers, and -D overrides for the rest."""
    config = tmp_path / "config.yaml"
    if not config.exists():
        # follow_depth 0: one link level a cycle, so that a test's site takes the cycles it counts on
        # (in-round following has tests of its own: tests/e2e/test_follow.py, tests/daemon/test_follow_daemon.py).
        config.write_text("fetcher:\n  min_delay: 0\n  concurrency: 8\n  follow_depth: 0\n")
    return [
        "-c", str(config),
        "-D", f"crawl_dir={tmp_path / 'crawl'}",
        "-D", f"daemon.seeds={tmp_path / 'seeds'}",
        "-D", "daemon.idle_sleep=0.2",
        "-D", "metrics.listen=127.0.0.1:0",
        "-D", "http.allow_private_networks=true",
        "-D", "log.format=json",
        *extra,
    ]


def seed(tmp_path: Path, name: str, *urls: str) -> Path:
    folder = tmp_path / "seeds"
    folder.mkdir(exist_ok=True)
    path = folder / name
    temp = folder / f".{name}.tmp"  # hidden names are not seed files: the daemon never sees half a file
    temp.write_text("\n".join(urls) + "\n")
    temp.rename(path)
    return path
