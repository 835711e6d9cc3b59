"""robots.txt across the rounds of one crawl: asked once per robots.cache_ttl, its rules kept."""

from __future__ import annotations

import pytest

from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]


async def test_robots_txt_is_requested_once_per_crawl_and_still_obeyed(tmp_path, demo_site, crawl_args):
    """Three rounds fetch pages, yet the demo site's robots.txt is requested once and /private/ never."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{demo_site.url('/')}\n")
    result = await run_crawler("crawl", "--seeds", str(seeds), "--rounds", "3", *crawl_args)
    assert result.code == 0, result.stderr[-2000:]
    assert len(result.stdout.split()) == 3  # one segment a round, each with pages to fetch
    paths = demo_site.paths()
    assert paths.count("/robots.txt") == 1
    assert not [p for p in paths if p.startswith("/private/")]
    assert len(paths) > 10
