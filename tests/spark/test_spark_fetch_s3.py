"""`crawler fetch --spark` over s3://: each task leases, pulls, fetches and publishes its own partition."""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import shutil

import pytest

from crawler.commands.cycle import cmd_fetch
from crawler.config import load_config
from crawler.segments.layout import Segment
from crawler.storage.access import ACCESS
from crawler.storage.workspace import open_workspace
from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler
from tests.spark.test_spark_fetch import fetched
from tests.storage import conftest as moto
from tests.storage.conftest import keys, staging_args
from tests.storage.test_partition_lease import HOSTS, PAGES, bucket_rows, make_segment


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]

# moto's S3 server and a fresh bucket, the fixtures of tests/storage.
s3_endpoint, s3, bucket = moto.s3_endpoint, moto.s3, moto.bucket


async def test_spark_tasks_fetch_an_s3_segment_through_the_bucket(tmp_path, demo_site, crawl_args, s3, bucket,
                                                                   s3_endpoint, spark):
    """Spark tasks over s3:// give the bucket a plain fetch's URLs and statuses; the driver's staging holds no part."""
    name, resolve = await make_segment(tmp_path, demo_site, s3_endpoint, bucket)
    whole_dir = tmp_path / "whole"
    shutil.copytree(tmp_path / "staging-a" / "s3" / bucket / "crawl", whole_dir)
    plain = await run_crawler("fetch", str(whole_dir / "segments" / name), *crawl_args,
                              "-D", f"http.resolve={resolve}", "-D", f"crawl_dir={whole_dir}")
    assert plain.code == 0, plain.stderr[-2000:]

    driver = tmp_path / "staging-driver"
    overrides = [*staging_args(driver, s3_endpoint, bucket), "-D", f"http.resolve={resolve}",
                 "-D", "spark.master=local[2]"]
    cfg = load_config(None, [o for o in overrides if o != "-D"])  # runs on the session's Spark (spark fixture)
    staging = cfg.crawl_path
    args = argparse.Namespace(segment=name, partition=None, spark=True)
    (staging / ".storage").mkdir(parents=True)
    fd = os.open(staging / ".storage" / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)  # another command shares the driver's staging copy, so what it held stays
    try:
        def drive() -> int:
            with open_workspace(cfg).command(cfg, args, ACCESS["fetch"]) as run:
                return cmd_fetch(run.cfg, run.args)

        # In a thread: this test's event loop keeps serving the site the Spark tasks fetch from.
        assert await asyncio.to_thread(drive) == 0
    finally:
        os.close(fd)

    held = sorted(p.relative_to(staging / "segments" / name).as_posix()
                  for p in (staging / "segments" / name).rglob("*") if p.is_file())
    assert held and all(rel.startswith("fetchlist/") for rel in held), held
    listed = keys(s3, bucket, f"crawl/segments/{name}/")
    for marker in ("fetcher/_done-00000", "fetcher/_done-00001", "fetcher/_SUCCESS", "content/_SUCCESS"):
        assert f"crawl/segments/{name}/{marker}" in listed
    assert keys(s3, bucket, f"crawl/segments/.leases/{name}/") == []
    rows = bucket_rows(s3, bucket, name, tmp_path)
    assert len(rows) == len(set(rows)) == len(PAGES) * len(HOSTS)
    assert dict(rows) == fetched(Segment(whole_dir / "segments" / name))
