"""`crawler fetch --spark`: each fetchlist partition fetched as one Spark task gives what one process does."""

from __future__ import annotations

import asyncio
import shutil

import pyarrow.parquet as pq
import pytest

from crawler.config import load_config
from crawler.fetcher.spark_fetch import fetch_on_spark
from crawler.segments.layout import Segment, partition_of
from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]

HOSTS = ["a.test", "b.test", "c.test", "e.test"]  # two per partition of 2


def fetched(segment: Segment) -> dict[str, str]:
    return {r["url"]: r["status"] for part in segment.parts("fetcher") for r in pq.read_table(part).to_pylist()}


async def test_spark_tasks_fetch_every_partition(demo_site, crawl_args, tmp_path, spark):
    """Fetched as Spark tasks (local[2]), a 2-partition segment has the same URLs and statuses, and _SUCCESS."""
    assert {partition_of(h, 2) for h in HOSTS} == {0, 1}
    port = demo_site.base_url.rsplit(":", 1)[1]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}/\nhttp://{h}:{port}/about/\n" for h in HOSTS))
    resolve = "{" + ", ".join(f"{h}: 127.0.0.1" for h in HOSTS) + "}"
    spark_dir, whole_dir = tmp_path / "spark", tmp_path / "whole"
    args = [*crawl_args, "-D", f"http.resolve={resolve}", "-D", f"crawl_dir={spark_dir}"]
    assert (await run_crawler("inject", str(seeds), *args)).code == 0
    generated = await run_crawler("generate", "--partitions", "2", *args)
    assert generated.code == 0, generated.stderr
    on_spark = Segment(spark_dir / "segments" / generated.stdout.strip().rsplit("/", 1)[1])
    shutil.copytree(spark_dir, whole_dir)
    whole = Segment(whole_dir / "segments" / on_spark.name)

    cfg = load_config(None, [a for a in args if a != "-D"] + ["spark.master=local[2]"])
    # In a thread: this test's event loop keeps serving the site the Spark tasks fetch from.
    count = await asyncio.to_thread(fetch_on_spark, cfg, on_spark)
    one = await run_crawler("fetch", str(whole.path), *args[:-2], "-D", f"crawl_dir={whole_dir}")
    assert one.code == 0, one.stderr[-500:]

    assert count == len(fetched(whole)) == 2 * len(HOSTS)
    assert fetched(on_spark) == fetched(whole) and set(fetched(whole).values()) == {"success"}
    assert on_spark.is_done("fetcher")
