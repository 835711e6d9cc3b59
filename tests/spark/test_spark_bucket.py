"""Spark jobs over an s3:// crawl_dir: the executors read and write the bucket, the driver only references it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import structlog

from crawler.config import CrawlerConfig
from crawler.jobs.dedup import dedup
from crawler.jobs.generate import generate
from crawler.jobs.inject import inject
from crawler.jobs.invertlinks import invertlinks, linkdb_store
from crawler.jobs.updatedb import updatedb
from crawler.jobs.updatesegs import updatesegs
from crawler.segments.layout import open_segment
from crawler.storage.access import ACCESS
from crawler.storage.references import SCRATCH, read_reference
from crawler.storage.workspace import open_workspace
from tests.conftest import run_crawler
from tests.storage.conftest import bucket, keys, s3, s3_endpoint, staging_args  # noqa: F401 - moto fixtures by name

from .conftest import spark_cfg
from .test_engines_agree import SECTIONS, rows, webdb_tables

pytestmark = pytest.mark.timeout(300)
LOG = structlog.get_logger()


def mirror(client: Any, name: str, prefix: str, dest: Path) -> Path:
    """A local copy of what the bucket holds below ``prefix`` (scratch and leases left out)."""
    for key in keys(client, name, prefix + "/"):
        rel = key[len(prefix) + 1:]
        if rel.startswith(SCRATCH) or rel.endswith(".lock"):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        client.download_file(name, key, str(dest / rel))
    return dest


@contextmanager
def command(cfg: CrawlerConfig, name: str, **args: Any) -> Iterator[tuple[CrawlerConfig, argparse.Namespace]]:
    """Run a CLI command's storage session in this process (so the jobs use the test session's Spark)."""
    with open_workspace(cfg).command(cfg, argparse.Namespace(**args), ACCESS[name]) as run:
        yield run.cfg, run.args


def tables(cfg: CrawlerConfig, segment: str) -> dict[str, Any]:
    inlinks = sorted((linkdb_store(cfg).require_current().path / "inlinks").glob("*.parquet"))
    fetcher = open_segment(cfg.crawl_path / "segments" / segment).parts("fetcher")
    return {**webdb_tables(cfg), "inlinks": rows(inlinks, ("to_url", "from_url")),
            "fetcher": rows(fetcher, ("url", "fetch_time"))}


async def test_spark_jobs_over_s3_match_duckdb_without_staging_data(demo_site, tmp_path, s3, bucket, s3_endpoint, spark):  # noqa: F811
    """The cycle's jobs on Spark over s3:// write DuckDB's rows, and the driver pulls no data for them."""
    staging = tmp_path / "staging"
    cli_args = staging_args(staging, s3_endpoint, bucket)
    on_s3 = spark_cfg(f"s3://{bucket}/crawl", storage={"endpoint": s3_endpoint, "staging_dir": str(staging)},
                      **SECTIONS)
    seeds, more = tmp_path / "seeds.txt", tmp_path / "more.txt"
    seeds.write_text(f"{demo_site.base_url}/\n")
    more.write_text(f"{demo_site.base_url}/\n{demo_site.base_url}/missing-page\n")
    for file in (seeds, more):  # the second inject links the live parts into the next version
        with command(on_s3, "inject") as (cfg, _):
            inject(cfg, file, LOG)
    duck = CrawlerConfig.model_validate({"crawl_dir": str(mirror(s3, bucket, "crawl", tmp_path / "duck")),
                                         **SECTIONS})
    assert len(webdb_tables(duck)["pages"]) == 2

    later = datetime(2030, 1, 1)  # every injected page is due
    with command(on_s3, "generate") as (cfg, _):
        segment = generate(cfg, LOG, now=later).segment
    assert segment is not None
    duck_segment = generate(duck, LOG, now=later).segment
    fetched = await run_crawler("fetch", segment.name, *cli_args)
    assert fetched.code == 0, fetched.stderr
    remote = mirror(s3, bucket, f"crawl/segments/{segment.name}", tmp_path / "duck" / "segments" / segment.name)
    assert rows(open_segment(remote).parts("fetchlist"), ("url",)) == rows(duck_segment.parts("fetchlist"), ("url",))

    for job in (updatedb, invertlinks, updatesegs):
        with command(on_s3, job.__name__, segments=[segment.name]) as (cfg, args):
            job(cfg, [open_segment(s) for s in args.segments], LOG, **({"now": later} if job is updatedb else {}))
        job(duck, [open_segment(remote)], LOG, **({"now": later} if job is updatedb else {}))
    with command(on_s3, "dedup") as (cfg, _):
        dedup(cfg, LOG)
    dedup(duck, LOG)

    expected = tables(duck, segment.name)
    got = tables(CrawlerConfig.model_validate({"crawl_dir": str(mirror(s3, bucket, "crawl", tmp_path / "got"))}),
                 segment.name)
    assert len(expected["pages"]) > 5 and expected["links"] and expected["inlinks"]
    for table in expected:
        assert got[table] == expected[table], table

    # The driver held references only; the staging copy the fetch used never held the databases.
    tree = staging / "by-reference" / "s3" / bucket / "crawl"
    parts = list(tree.rglob("*.parquet"))
    assert parts and all(read_reference(p) for p in parts)
    assert not (staging / "s3" / bucket / "crawl" / "webdb").exists()
    assert not (staging / "s3" / bucket / "crawl" / "linkdb").exists()
    assert keys(s3, bucket, f"crawl/{SCRATCH}") == []
