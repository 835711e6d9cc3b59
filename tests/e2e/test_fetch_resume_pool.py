"""`crawler fetch` with a parse pool (fetcher.parse_processes) cut off by SIGKILL resumes like one without."""

from __future__ import annotations

from tests.conftest import ROOT, run_crawler
from tests.e2e.test_fetch_resume import _args, _assert_complete_once, _killed_after_first_commit, slow_hosts
from tests.fetcher.conftest import read_rows

__all__ = ["slow_hosts"]  # the fixture, used by name

POOL = ["-D", "fetcher.parse_processes=1", "-D", "fetcher.parse_pool_min_entries=0"]


class TestResumeWithParsePool:
    async def test_sigkill_then_rerun_loses_and_duplicates_nothing(self, tmp_path, slow_hosts):
        """SIGKILL of the fetch process leaves only whole parts; a rerun records every URL and its parse once."""
        seg, urls, committed = await _killed_after_first_commit(tmp_path, slow_hosts, *POOL)
        # Every committed page has its parse rows: the pool's writer wrote them in the same part.
        assert {r["url"] for r in read_rows(seg, "parse_data")} == committed

        result = await run_crawler("fetch", str(seg.path), *_args(tmp_path), *POOL, cwd=ROOT)
        assert result.code == 0, result.stderr[-2000:]
        _assert_complete_once(seg, urls)
        assert {r["url"] for r in read_rows(seg, "parse_text")} == set(urls)
