"""`crawler fetch` with a parse pool (fetcher.parse_processes) cut off by SIGKILL resumes like one without."""

from __future__ import annotations

import asyncio
import os
import sys

from tests.conftest import ROOT, run_crawler
from tests.e2e.test_fetch_resume import PAGES, _args, _assert_complete_once, _first_commit, slow_hosts
from tests.fetcher.conftest import make_segment, read_rows

__all__ = ["slow_hosts"]  # the fixture, used by name

POOL = ["-D", "fetcher.parse_processes=1"]


class TestResumeWithParsePool:
    async def test_sigkill_then_rerun_loses_and_duplicates_nothing(self, tmp_path, slow_hosts):
        """SIGKILL of the fetch process leaves only whole parts; a rerun records every URL and its parse once."""
        servers, reached = slow_hosts
        urls = [s.url(f"/p{i}") for s in servers for i in range(PAGES)]
        seg = make_segment(tmp_path, urls, partitions=2)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawler", "fetch", str(seg.path), *_args(tmp_path), *POOL,
            cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        await asyncio.wait_for(reached.wait(), 60)
        await _first_commit(seg)
        proc.kill()
        await proc.communicate()
        committed = {r["url"] for r in read_rows(seg)}
        assert 0 < len(committed) < len(urls)
        # Every committed page has its parse rows: the pool's writer wrote them in the same part.
        assert {r["url"] for r in read_rows(seg, "parse_data")} == committed

        result = await run_crawler("fetch", str(seg.path), *_args(tmp_path), *POOL, cwd=ROOT)
        assert result.code == 0, result.stderr[-2000:]
        _assert_complete_once(seg, urls)
        assert {r["url"] for r in read_rows(seg, "parse_text")} == set(urls)
