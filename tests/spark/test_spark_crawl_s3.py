"""crawl with Spark jobs over an s3:// crawl_dir: each step staged as its own command, so any master works."""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from crawler.cli import build_parser
from crawler.commands.cycle import cmd_crawl
from crawler.config import CrawlerConfig
from crawler.crawldir import parse_remote
from crawler.devserver import SiteServer
from crawler.jobs.generate import generate
from crawler.jobs.invertlinks import linkdb_store
from crawler.storage.access import ACCESS
from crawler.storage.bucket import Bucket
from crawler.storage.lease import Lease, LeaseHeld
from crawler.storage.references import SCRATCH, read_reference
from crawler.storage.workspace import SteppedWorkspace, open_workspace
from tests.conftest import DEMO_SITE
from tests.storage.conftest import bucket, keys, s3, s3_endpoint  # noqa: F401 - moto fixtures by name

from .conftest import spark_cfg
from .test_engines_agree import SECTIONS, rows, webdb_tables
from .test_spark_bucket import mirror

pytestmark = pytest.mark.timeout(300)
LOG = structlog.get_logger()
FAST = {"http": {"allow_private_networks": True}, "fetcher": {"min_delay": 0, "concurrency": 16, "follow_depth": 0}}


@pytest.fixture
def site_in_thread() -> Iterator[SiteServer]:
    """The demo site served from a thread of its own: the fetch must run on the main thread (signal handlers)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = SiteServer(DEMO_SITE, "127.0.0.1", 0)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def crawl(cfg: CrawlerConfig, *argv: str) -> None:
    """``crawler crawl ARGV`` as the CLI runs it, in this process (so the jobs use the test session's Spark)."""
    args = build_parser().parse_args(["crawl", *argv])
    with open_workspace(cfg).command(cfg, args, args.access) as run:
        assert cmd_crawl(run.cfg, run.args) == 0


def outcome(cfg: CrawlerConfig) -> dict[str, Any]:
    """What a crawl decided, without its clock: URLs and statuses, links, inlinks, segments merged."""
    tables = webdb_tables(cfg)
    inlinks = sorted((linkdb_store(cfg).require_current().path / "inlinks").glob("*.parquet"))
    return {
        "pages": [(r["url"], r["status"]) for r in tables["pages"]],
        "links": [(r["from_url"], r["to_url"]) for r in tables["links"]],
        "inlinks": [(r["to_url"], r["from_url"]) for r in rows(inlinks, ("to_url", "from_url"))],
        "merged": len(tables["merged"]),
        "linked": len(linkdb_store(cfg).require_current().merged_segments),
    }


def test_crawl_on_spark_over_s3_matches_duckdb(site_in_thread, tmp_path, s3, bucket, s3_endpoint, spark):  # noqa: F811
    """crawl --rounds 2 with Spark jobs over s3:// (then a resumed one) ends as on DuckDB, the databases never staged."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{site_in_thread.base_url}/\n")
    staging = tmp_path / "staging"
    on_s3 = spark_cfg(f"s3://{bucket}/crawl", storage={"endpoint": s3_endpoint, "staging_dir": str(staging)},
                      **SECTIONS, **FAST)
    duck = CrawlerConfig.model_validate({"crawl_dir": str(tmp_path / "duck"), **SECTIONS, **FAST})

    crawl(duck, "--seeds", str(seeds), "--rounds", "2")
    crawl(on_s3, "--seeds", str(seeds), "--rounds", "2")

    expected = outcome(duck)
    got = outcome(CrawlerConfig.model_validate({"crawl_dir": str(mirror(s3, bucket, "crawl", tmp_path / "got"))}))
    assert expected["merged"] == 2 and len(expected["pages"]) > 10 and expected["inlinks"]
    assert got == expected

    # Killed after a generate: the next crawl finds the segment in the bucket and finishes it.
    assert generate(duck, LOG).segment is not None
    with open_workspace(on_s3).command(on_s3, argparse.Namespace(), ACCESS["generate"]) as run:
        assert generate(run.cfg, LOG).segment is not None
    crawl(duck, "--rounds", "0")
    crawl(on_s3, "--rounds", "0")
    expected = outcome(duck)
    got = outcome(CrawlerConfig.model_validate({"crawl_dir": str(mirror(s3, bucket, "crawl", tmp_path / "again"))}))
    assert expected["merged"] == expected["linked"] == 3
    assert got == expected

    # While one crawl runs, another on the bucket is refused: it would resume the first one's segment.
    assert keys(s3, bucket, "crawl/crawl.lock") == []
    running = Lease(Bucket(parse_remote(on_s3.crawl_dir), on_s3.storage), "crawl/crawl.lock", 60, LOG)
    running.acquire()
    try:
        with pytest.raises(LeaseHeld, match="crawl.lock"):
            crawl(on_s3, "--rounds", "1")
    finally:
        running.release()

    # The jobs' executors read and wrote the bucket: the driver's trees never held a database part.
    ordinary = staging / "s3" / bucket / "crawl"
    assert not [p for store in ("webdb", "linkdb") for p in (ordinary / store).rglob("*.parquet")]
    tree = staging / "by-reference" / "s3" / bucket / "crawl"
    parts = list(tree.rglob("*.parquet"))
    assert parts and all(read_reference(p) for p in parts)
    assert keys(s3, bucket, f"crawl/{SCRATCH}") == []


def test_crawl_steps_stay_in_one_tree_on_a_local_crawl_dir(tmp_path: Path) -> None:
    """With Spark jobs on a local crawl_dir, crawl is not split into staged steps (there is nothing to stage)."""
    assert not isinstance(open_workspace(spark_cfg(tmp_path / "crawl")), SteppedWorkspace)
    assert isinstance(open_workspace(spark_cfg("s3://bucket/crawl")), SteppedWorkspace)

