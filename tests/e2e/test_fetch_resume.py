"""`crawler fetch` cut off by SIGKILL or SIGTERM resumes: every URL ends up recorded exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from tests.conftest import ROOT, run_crawler
from tests.fetcher.conftest import Server, make_segment, read_rows
from tests.procs import kill_child, signal_child

HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
PAGES = 80  # per host


@pytest.fixture
async def slow_hosts():
    """Three hosts of PAGES pages each; ``reached`` is set once 60 page requests were answered."""
    reached = asyncio.Event()
    count = 0

    async def handler(request):
        nonlocal count
        # Slower after the first 60, so a part gets committed well before the last page is served.
        await asyncio.sleep(0.01 if count < 60 else 0.05)
        count += 1
        if count >= 60:
            reached.set()
        return web.Response(text=f"<html><title>{request.path}</title>x</html>", content_type="text/html")

    started = []
    for host in HOSTS:
        server = Server(host, {f"/p{i}": handler for i in range(PAGES)})
        await server.start()
        started.append(server)
    yield started, reached
    for server in started:
        await server.runner.cleanup()


async def _first_commit(seg, timeout: float = 60.0) -> None:
    """Wait until the fetch process has committed a fetcher part (the kill must land after one)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not list((seg.path / "fetcher").glob("part-*.parquet")):
        if loop.time() > deadline:
            raise TimeoutError("no fetcher part was committed")
        await asyncio.sleep(0.05)


def _args(tmp_path) -> list[str]:
    return ["-D", f"crawl_dir={tmp_path}", "-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0",
            "-D", "fetcher.commit_records=10", "-D", "fetcher.commit_interval=0.2", "-D", "log.format=json"]


async def _start_fetch(seg, tmp_path, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", "fetch", str(seg.path), *_args(tmp_path), *extra,
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def _killed_after_first_commit(tmp_path, slow_hosts, *extra: str):
    """A 2-partition fetch SIGKILLed once its first part is committed: (segment, urls, committed urls)."""
    servers, reached = slow_hosts
    urls = [s.url(f"/p{i}") for s in servers for i in range(PAGES)]
    seg = make_segment(tmp_path, urls, partitions=2)
    proc = await _start_fetch(seg, tmp_path, *extra)
    await asyncio.wait_for(reached.wait(), 60)
    await _first_commit(seg)
    kill_child(proc)
    await proc.communicate()
    committed = {r["url"] for r in read_rows(seg)}
    assert 0 < len(committed) < len(urls)
    return seg, urls, committed


def _assert_complete_once(seg, urls) -> None:
    rows = read_rows(seg)
    counts = Counter(r["url"] for r in rows)
    assert set(counts) == set(urls)
    assert max(counts.values()) == 1, [u for u, c in counts.items() if c > 1][:5]
    parsed = Counter(r["url"] for r in read_rows(seg, "parse_data"))
    assert max(parsed.values()) == 1
    archived = Counter()
    for warc in seg.dir("content").glob("*.warc.gz"):
        with open(warc, "rb") as fh:
            archived.update(r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(fh)
                            if r.rec_type == "response")
    assert set(archived) == set(urls) and max(archived.values()) == 1
    assert (seg.path / "fetcher" / "_SUCCESS").exists()


class TestResume:
    async def test_sigkill_then_rerun_loses_and_duplicates_nothing(self, tmp_path, slow_hosts):
        """After SIGKILL mid-fetch, a rerun skips the committed URLs and records the rest, each once."""
        servers, _ = slow_hosts
        seg, urls, committed = await _killed_after_first_commit(tmp_path, slow_hosts)
        assert not (seg.path / "fetcher" / "_SUCCESS").exists()
        killed_at = len([h for s in servers for h in s.hits])

        result = await run_crawler("fetch", str(seg.path), *_args(tmp_path), cwd=ROOT)
        assert result.code == 0, result.stderr[-2000:]
        _assert_complete_once(seg, urls)
        refetched = {s.url(h.path) for s in servers for h in s.hits[killed_at:] if h.path != "/robots.txt"}
        assert not refetched & committed
        assert any(e["event"] == "fetch.resume" for e in result.events())

    async def test_sigterm_commits_and_stops_then_rerun_completes(self, tmp_path, slow_hosts):
        """SIGTERM makes fetch commit what it has and exit non-zero with a one-line reason; a rerun finishes it."""
        servers, reached = slow_hosts
        urls = [s.url(f"/p{i}") for s in servers for i in range(PAGES)]
        seg = make_segment(tmp_path, urls)
        proc = await _start_fetch(seg, tmp_path)
        await asyncio.wait_for(reached.wait(), 60)
        signal_child(proc, signal.SIGTERM)
        _, err = await proc.communicate()
        assert proc.returncode == 1
        assert "stopped by a signal" in err.decode().splitlines()[-1]
        assert '"fetch.signal"' in err.decode()
        assert not (seg.path / "fetcher" / "_SUCCESS").exists()
        assert read_rows(seg)

        result = await run_crawler("fetch", str(seg.path), *_args(tmp_path), cwd=ROOT)
        assert result.code == 0, result.stderr[-2000:]
        _assert_complete_once(seg, urls)
