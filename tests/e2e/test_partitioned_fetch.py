"""A segment fetched as its partitions in separate processes (as on several machines) equals one fetch."""

from __future__ import annotations

import asyncio
import shutil

import pyarrow.parquet as pq
import pytest

from crawler.segments.layout import Segment, partition_of
from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]

HOSTS = ["a.test", "b.test", "c.test", "e.test"]  # two per partition of 2


def fetched(segment: Segment) -> dict[str, str]:
    return {r["url"]: r["status"] for part in segment.parts("fetcher") for r in pq.read_table(part).to_pylist()}


async def test_two_partition_processes_fetch_what_one_process_does(demo_site, crawl_args, tmp_path):
    """`fetch --partition 0` and `--partition 1` run at once give the same URLs and statuses as one `fetch`."""
    assert {partition_of(h, 2) for h in HOSTS} == {0, 1}
    port = demo_site.base_url.rsplit(":", 1)[1]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}/\nhttp://{h}:{port}/about/\n" for h in HOSTS))
    resolve = "{" + ", ".join(f"{h}: 127.0.0.1" for h in HOSTS) + "}"
    split_dir, whole_dir = tmp_path / "split", tmp_path / "whole"
    args = [*crawl_args, "-D", f"http.resolve={resolve}"]
    assert (await run_crawler("inject", str(seeds), *args, "-D", f"crawl_dir={split_dir}")).code == 0
    generated = await run_crawler("generate", "--partitions", "2", *args, "-D", f"crawl_dir={split_dir}")
    assert generated.code == 0, generated.stderr
    split = Segment(split_dir / "segments" / generated.stdout.strip().rsplit("/", 1)[1])
    shutil.copytree(split_dir, whole_dir)
    whole = Segment(whole_dir / "segments" / split.name)

    parts = await asyncio.gather(*(
        run_crawler("fetch", str(split.path), "--partition", str(p), *args, "-D", f"crawl_dir={split_dir}")
        for p in (0, 1)
    ))
    assert [p.code for p in parts] == [0, 0], [p.stderr[-500:] for p in parts]
    one = await run_crawler("fetch", str(whole.path), *args, "-D", f"crawl_dir={whole_dir}")
    assert one.code == 0, one.stderr[-500:]

    assert len(fetched(whole)) == 2 * len(HOSTS) and set(fetched(whole).values()) == {"success"}
    assert fetched(split) == fetched(whole)
