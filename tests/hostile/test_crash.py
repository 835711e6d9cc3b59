"""Crash safety: `crawler crawl` killed with SIGKILL again and again loses nothing and duplicates nothing.

The kill lands at a random moment (fixed seed) inside a chosen phase: during a
fetch, an updatedb, a generate, an invertlinks, or right after start-up (inject,
resume). After every kill the same command is run again; at the end the crawl
database must equal the one an uninterrupted crawl of the same site builds, and
every segment must read back, each URL recorded once.

``CRAWLER_CRASH_KILLS`` sets the number of kills (default 20).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import shutil
import signal
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import structlog
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from crawler.config import load_config
from crawler.jobs.inject import inject
from crawler.jobs.readdb import dump_jsonl
from crawler.jobs.readseg import dump_segment
from crawler.segments.layout import list_segments
from crawler.webdb.store import VersionedStore
from tests.conftest import ROOT, run_crawler
from tests.procs import kill_child

KILLS = int(os.environ.get("CRAWLER_CRASH_KILLS", "20"))
SEED = 20261129
DEPTH, WIDTH = 9, 4  # a crawl of DEPTH + 1 rounds, WIDTH pages per level and host
HOSTS = ("127.0.8.1", "127.0.8.2")
# phase -> (log line that starts it, longest wait after it before the kill, seconds)
PHASES = {
    "fetch": ('"event": "fetch.start"', 0.4),
    "updatedb": ('"job": "updatedb"', 0.2),
    "generate": ('"job": "generate"', 0.08),
    "invertlinks": ('"job": "invertlinks"', 0.1),
    "startup": (None, 0.9),
}


class Site:
    """Two hosts of a deep site: pages, a 404, a redirect and a robots-disallowed path per level."""

    def __init__(self) -> None:
        self.runners: list[web.AppRunner] = []
        self.bases: list[str] = []

    def link(self, level: int, i: int) -> str:
        return f"{self.bases[i % 2]}/l{level}/p{i}.html"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n")
        await asyncio.sleep(0.02)  # so a fetch lasts long enough to be cut
        if path.startswith("/moved/"):
            return web.Response(status=301, headers={"Location": path.replace("/moved/", "/l1/", 1)})
        parts = path.strip("/").split("/")
        if len(parts) != 2 or not parts[0].startswith("l") or parts[1] in ("missing.html",):
            return web.Response(status=404)
        level = int(parts[0][1:])
        links = [self.link(level + 1, i) for i in range(WIDTH)] if level < DEPTH else []
        links += ["/private/x.html", f"/l{level}/missing.html", "/moved/p0.html"]
        anchors = "".join(f'<a href="{u}">{u}</a>' for u in links)
        return web.Response(text=f"<html><title>{path}</title><body>{anchors}</body></html>",
                            content_type="text/html")

    async def __aenter__(self) -> Site:
        for host in HOSTS:
            app = web.Application()
            app.router.add_get("/{tail:.*}", self.handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, host, 0).start()
            self.runners.append(runner)
            self.bases.append(f"http://{host}:{runner.addresses[0][1]}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        for runner in self.runners:
            await runner.cleanup()


def _args(crawl_dir: Path, seeds: Path) -> list[str]:
    return ["crawl", "--seeds", str(seeds), "--rounds", str(DEPTH + 5),
            "-D", f"crawl_dir={crawl_dir}", "-D", "log.format=json", "-D", "http.allow_private_networks=true",
            "-D", "fetcher.min_delay=0", "-D", "fetcher.commit_records=3", "-D", "fetcher.commit_interval=0.2",
            "-D", "jobs.threads=1", "-D", "fetcher.follow_depth=0"]  # rounds to be killed in


async def _run_and_kill(args: list[str], phase: str, rng: random.Random) -> bool:
    """Start the crawl, SIGKILL it at a random moment of ``phase``; False if it finished first."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", *args, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    marker, longest = PHASES[phase]

    async def kill_later() -> None:
        if marker is not None:
            while (line := await proc.stderr.readline()) and marker.encode() not in line:
                pass
            if not line:
                return  # finished without reaching the phase
        await asyncio.sleep(rng.uniform(0.0, longest) if marker else rng.uniform(0.3, longest))
        kill_child(proc)

    killer = asyncio.create_task(kill_later())
    drain = asyncio.create_task(proc.stderr.read()) if marker is None else None
    await killer
    if drain is None:
        drain = asyncio.create_task(proc.stderr.read())
    await drain
    code = await asyncio.wait_for(proc.wait(), 60)
    assert code in (0, -signal.SIGKILL), f"crawl failed with {code} after a kill in {phase}"
    return code == -signal.SIGKILL


def _db(crawl_dir: Path) -> dict[str, str]:
    cfg = load_config(None, [f"crawl_dir={crawl_dir}"])
    out = io.StringIO()
    dump_jsonl(cfg, out, None)
    return {r["url"]: r["status"] for r in map(json.loads, out.getvalue().splitlines())}


def _check_segments(crawl_dir: Path) -> None:
    """Every segment reads back; in each, every fetchlist URL has one fetcher row, one parse row at most,
    and one WARC response record at most."""
    version = VersionedStore(crawl_dir / "webdb").current()
    assert version is not None
    for seg in list_segments(crawl_dir / "segments"):
        if not seg.is_done("fetchlist"):
            continue  # cut off during generate: never used, as crawl only takes finished fetchlists
        assert seg.name in version.merged_segments, f"{seg.name} never merged"
        listed = {u for p in seg.parts("fetchlist") for u in pq.read_table(p, columns=["url"]).column("url").to_pylist()}
        rows = Counter(u for p in seg.parts("fetcher") for u in pq.read_table(p, columns=["url"]).column("url").to_pylist())
        parsed = Counter(u for p in seg.parts("parse_data") for u in pq.read_table(p, columns=["url"]).column("url").to_pylist())
        assert listed <= set(rows), f"{seg.name}: lost {sorted(listed - set(rows))[:3]}"
        assert max(rows.values()) == 1 and max(parsed.values(), default=1) == 1, seg.name
        archived: Counter[str] = Counter()
        for warc in seg.parts("content", "warc.gz"):
            with open(warc, "rb") as fh:
                archived.update(r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(fh)
                                if r.rec_type == "response")
        assert max(archived.values(), default=1) == 1, seg.name
        assert dump_segment(seg, io.StringIO()) == len(rows)


@pytest.mark.timeout(400)
async def test_sigkill_at_random_moments_loses_nothing(tmp_path):
    """After KILLS SIGKILLs across fetch, updatedb, generate, invertlinks and start-up, plus a final run,
    the crawl database equals an uninterrupted crawl's and every segment holds each URL exactly once."""
    async with Site() as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(site.link(0, 0) + "\n" + site.link(0, 1) + "\n")
        clean, crashed = tmp_path / "clean", tmp_path / "crashed"
        result = await run_crawler(*_args(clean, seeds), cwd=ROOT)
        assert result.code == 0, result.stderr[-2000:]

        rng = random.Random(SEED)
        order = list(PHASES)
        killed = Counter()
        for i in range(KILLS):
            phase = order[i % len(order)]
            if await _run_and_kill(_args(crashed, seeds), phase, rng):
                killed[phase] += 1
        final = await run_crawler(*_args(crashed, seeds), cwd=ROOT)
        assert final.code == 0, final.stderr[-2000:]
        listing = await run_crawler("readseg", "--list", "-D", f"crawl_dir={crashed}", cwd=ROOT)
        assert listing.code == 0, listing.stderr[-2000:]

    assert sum(killed.values()) >= KILLS * 3 // 4, killed  # most runs were really cut off
    expected = _db(clean)
    assert len(expected) > DEPTH * WIDTH
    assert _db(crashed) == expected
    _check_segments(crashed)
    _check_segments(clean)


def test_version_renamed_but_never_named_by_current_is_replaced(tmp_path):
    """A writer killed between renaming its new webdb version into place and updating CURRENT leaves an
    orphan folder; the next writer replaces it instead of failing on it forever."""
    cfg = load_config(None, [f"crawl_dir={tmp_path}"])
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/\n")
    inject(cfg, seeds, structlog.get_logger())
    store = VersionedStore(tmp_path / "webdb")
    live = store.require_current()
    shutil.copytree(live.path, live.path.with_name(f"v{live.number + 1:06d}"))  # the orphan a kill leaves
    seeds.write_text("http://b.example/\n")
    inject(cfg, seeds, structlog.get_logger())
    assert store.require_current().number == live.number + 1
    assert set(_db(tmp_path)) == {"http://a.example/", "http://b.example/"}
