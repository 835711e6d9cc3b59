"""Shared fixtures: real servers on loopback and the crawler run as a real process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

from crawler.devserver import SiteServer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def _processes_keep_temp_files_in_pytests_folder(tmp_path_factory):
    """Every process a test starts (they inherit TMPDIR) keeps its temporary files under pytest's own
    temporary folder, which pytest prunes: a crawl that a test SIGKILLs cannot remove the folder of its parse
    pool's fork server socket (multiprocessing's pymp-*), and each such test left them in /tmp."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmp")))
        yield


@contextlib.asynccontextmanager
async def serve_app(app: web.Application) -> AsyncIterator[int]:
    """Serve an aiohttp app on 127.0.0.1 (a free port) for the block; yields the port."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]
    finally:
        await runner.cleanup()
DEMO_SITE = ROOT / "examples" / "site"


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def events(self) -> list[dict]:
        """The JSON log lines the command wrote on stderr."""
        out = []
        for line in self.stderr.splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out


async def run_crawler(*args: str, cwd: Path | None = None, stdin: bytes | None = None,
                      env: dict[str, str] | None = None) -> CliResult:
    """Run `python -m crawler ARGS` without blocking the loop that serves the test site (``env``: set besides ours)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", *args,
        cwd=cwd, env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin)
    return CliResult(proc.returncode or 0, out.decode(), err.decode())


@pytest.fixture
async def demo_site():
    async with SiteServer(DEMO_SITE, "127.0.0.1", 0) as server:
        yield server


@pytest.fixture
def expected_demo() -> dict:
    return json.loads((ROOT / "tests" / "sites" / "expected_demo.json").read_text())


# For the tests of what one round does (its segment, its counts, what the next round finds): one link
# level a round, as without in-round following. A module asks for it by overriding ``crawl_args`` with
# these added. In-round following, the default, has tests of its own (tests/e2e/test_follow.py), and
# every other crawl test runs with it.
ONE_LEVEL_A_ROUND = ["-D", "fetcher.follow_depth=0"]


@pytest.fixture
def crawl_args(tmp_path: Path) -> list[str]:
    """Config overrides for a fast crawl of loopback servers into a temp crawl_dir."""
    return [
        "-D", f"crawl_dir={tmp_path}",
        "-D", "http.allow_private_networks=true",
        "-D", "fetcher.min_delay=0",
        "-D", "fetcher.concurrency=16",
        "-D", "log.format=json",
    ]
