"""`crawl` starts a parse pool for each round large enough to pay for it (fetcher.parse_pool_min_entries:
by default every round), and ends it after the round's fetch."""

from __future__ import annotations

import pytest

from crawler.segments.layout import Segment
from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler
from tests.fetcher.conftest import read_rows


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]


def _pool_events(result) -> list[dict]:
    return [e for e in result.events() if e.get("event") == "crawl.parse_pool"]


async def _crawl(tmp_path, demo_site, crawl_args, *overrides: str):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(demo_site.url("/") + "\n")
    result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "3", *crawl_args,
                               "-D", "fetcher.parse_processes=1", *overrides)
    assert result.code == 0, result.stderr[-2000:]
    return result


async def test_a_small_crawl_parses_in_the_fetch_process(tmp_path, demo_site, crawl_args):
    """No round of the demo site has 1,000 entries: no pool is started, and every page is parsed all the same."""
    result = await _crawl(tmp_path, demo_site, crawl_args, "-D", "fetcher.parse_pool_min_entries=1000")
    assert _pool_events(result) == []
    segments = [Segment(p) for p in sorted((tmp_path / "segments").iterdir())]
    fetched = {r["url"] for s in segments for r in read_rows(s) if r["status"] == "success"}
    assert len(fetched) > 5 and {r["url"] for s in segments for r in read_rows(s, "parse_text")} == fetched


async def test_a_pool_starts_for_each_round_that_wants_it(tmp_path, demo_site, crawl_args):
    result = await _crawl(tmp_path, demo_site, crawl_args, "-D", "fetcher.parse_pool_min_entries=2")
    started = _pool_events(result)
    # The first round fetches the one seed (no pool); the second and third, what the round before linked
    # to: each starts its own, the one before having ended with its fetch.
    rounds = [e["segment"] for e in result.events() if e.get("event") == "crawl.round"]
    assert len(rounds) == 3 and [e["segment"] for e in started] == rounds[1:]
    assert all(e["processes"] == 1 for e in started)


async def test_by_default_the_pool_parses_from_the_first_round(tmp_path, demo_site, crawl_args):
    """parse_pool_min_entries ships at 0: the one-seed first round already parses in the pool."""
    result = await _crawl(tmp_path, demo_site, crawl_args)
    started = _pool_events(result)
    rounds = [e["segment"] for e in result.events() if e.get("event") == "crawl.round"]
    assert [e["segment"] for e in started] == rounds and len(rounds) == 3
    segments = [Segment(p) for p in sorted((tmp_path / "segments").iterdir())]
    fetched = {r["url"] for s in segments for r in read_rows(s) if r["status"] == "success"}
    assert len(fetched) > 5 and {r["url"] for s in segments for r in read_rows(s, "parse_text")} == fetched


async def test_a_crawl_with_nothing_due_starts_no_pool(tmp_path, crawl_args):
    """A crawl whose webdb has nothing due ends at once, says why, and starts no parse pool."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("ftp://127.0.0.1/not-fetched\n")  # rejected by inject: the webdb stays empty
    result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "3", *crawl_args,
                               "-D", "fetcher.parse_processes=1")
    assert result.code == 0, result.stderr[-2000:]
    assert _pool_events(result) == []
    done = [e for e in result.events() if e.get("event") == "crawl.done"]
    assert [(e["rounds"], e["reason"]) for e in done] == [(0, "nothing due")]
