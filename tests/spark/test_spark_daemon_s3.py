"""The daemon with Spark jobs over an s3:// crawl_dir: each job and fetch staged as its command, as crawl does."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvloop

from crawler.cli import build_parser
from crawler.config import CrawlerConfig, with_overrides
from crawler.crawldir import parse_remote
from crawler.daemon.reload import ConfigSource
from crawler.daemon.service import Service
from crawler.devserver import SiteServer
from crawler.fetcher.runner import run_fetch
from crawler.jobs.generate import generate
from crawler.jobs.invertlinks import linkdb_store
from crawler.segments.layout import open_segment
from crawler.storage.bucket import Bucket
from crawler.storage.lease import Lease, LeaseHeld
from crawler.storage.references import SCRATCH
from crawler.storage.workspace import FetchArgs, GenerateArgs, open_workspace
from tests.daemon.conftest import write_site
from tests.storage.conftest import bucket, keys, read, s3, s3_endpoint  # noqa: F401 - moto fixtures by name

from .conftest import spark_cfg
from .test_engines_agree import SECTIONS, webdb_tables
from .test_spark_bucket import mirror
from .test_spark_crawl_s3 import FAST, LOG, site_in_thread  # noqa: F401 - the site fixture by name

pytestmark = pytest.mark.timeout(300)


def run_daemon(cfg: CrawlerConfig) -> Service:
    """``crawler daemon`` as the CLI runs it, in this process (so the jobs use the test session's Spark)."""
    args = build_parser().parse_args(["daemon"])
    with open_workspace(cfg).command(cfg, args, args.access) as run:
        service = Service(ConfigSource(None, [], run.cfg))
        assert uvloop.run(service.serve()) == 0
    return service


@pytest.fixture
def three_sites(tmp_path) -> Iterator[list[SiteServer]]:
    """Hosts 127.0.0.1, .2 and .3 with an index page each, served from a thread (the daemon runs on this one)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers = [SiteServer(write_site(tmp_path / f"site-{n}", 0), f"127.0.0.{n}", 0) for n in (1, 2, 3)]
    for server in servers:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        yield servers
    finally:
        for server in servers:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def pages(cfg: CrawlerConfig) -> list[tuple[str, str]]:
    return [(r["url"], r["status"]) for r in webdb_tables(cfg)["pages"]]


def test_daemon_on_spark_over_s3_matches_duckdb(site_in_thread, tmp_path, s3, bucket, s3_endpoint,  # noqa: F811
                                                spark) -> None:
    """Two daemon cycles with Spark jobs over s3:// reach the pages a DuckDB daemon does; no database is staged."""
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "a.txt").write_text(f"{site_in_thread.base_url}/\n")
    # Overlap on: generate runs by reference while a fetch holds the staging copy. On one host nothing is due
    # beside a running fetch, so which URLs each segment gets does not depend on timing.
    daemon: dict[str, Any] = {"seeds": str(seeds), "max_cycles": 2, "idle_sleep": 0.2}
    common = {**SECTIONS, **FAST, "daemon": daemon, "metrics": {"listen": ""}}
    staging = tmp_path / "staging"
    on_s3 = spark_cfg(f"s3://{bucket}/crawl", storage={"endpoint": s3_endpoint, "staging_dir": str(staging)},
                      **common)
    duck = CrawlerConfig.model_validate({"crawl_dir": str(tmp_path / "duck"), **common})

    run_daemon(duck)
    service = run_daemon(on_s3)

    expected = pages(duck)
    got = pages(CrawlerConfig.model_validate({"crawl_dir": str(mirror(s3, bucket, "crawl", tmp_path / "got"))}))
    assert len(expected) > 10 and len(webdb_tables(duck)["merged"]) == 2
    assert got == expected
    assert service.status.last_cycle["db_urls"] == len(expected)  # the figures the engine read in the bucket

    # Killed after a fetch, before its merge: the next daemon finds the fetched segment in the bucket and merges it.
    run_fetch(duck, generate(duck, LOG).segment)
    workspace = open_workspace(on_s3)
    with workspace.step(on_s3, "generate", GenerateArgs()) as run:
        name = generate(run.cfg, LOG).segment.name
    with workspace.step(on_s3, "fetch", FetchArgs(name)) as run:
        run_fetch(run.cfg, open_segment(run.args.segment), run.args.partition)
    run_daemon(with_overrides(duck, daemon={"max_cycles": 1}))
    run_daemon(with_overrides(on_s3, daemon={"max_cycles": 1}))
    expected = pages(duck)
    again = CrawlerConfig.model_validate({"crawl_dir": str(mirror(s3, bucket, "crawl", tmp_path / "again"))})
    assert len(webdb_tables(duck)["merged"]) == 3 and len(expected) > len(got)
    assert pages(again) == expected
    assert len(webdb_tables(again)["merged"]) == len(linkdb_store(again).require_current().merged_segments) == 3
    # While a crawl (or another daemon) runs on the bucket, the daemon is refused: it would resume its segment.
    running = Lease(Bucket(parse_remote(on_s3.crawl_dir), on_s3.storage), "crawl/crawl.lock", 60, LOG)
    running.acquire()
    try:
        with pytest.raises(LeaseHeld, match="crawl.lock"):
            run_daemon(on_s3)
    finally:
        running.release()
    assert "a.txt" in read(s3, bucket, "crawl/daemon-state.json")
    assert keys(s3, bucket, "crawl/crawl.lock") == [] and keys(s3, bucket, f"crawl/{SCRATCH}") == []
    ordinary = staging / "s3" / bucket / "crawl"
    assert not [p for store in ("webdb", "linkdb") for p in (ordinary / store).rglob("*.parquet")]


def test_daemon_on_spark_over_s3_fetches_segments_side_by_side(three_sites, tmp_path, s3, bucket,  # noqa: F811
                                                              s3_endpoint, spark, capfd) -> None:  # noqa: F811
    """Staged by step, the next segment is generated by reference and fetched while a slow host ends the first."""
    a, b, c = three_sites
    a.delay = 5.0  # longer than a generate on Spark: the daemon generates at most half the time
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "abc.txt").write_text("".join(f"{server.url('/')}\n" for server in three_sites))
    on_s3 = spark_cfg(f"s3://{bucket}/crawl", storage={"endpoint": s3_endpoint, "staging_dir": str(tmp_path / "st")},
                      **FAST, generate={"top_n": 2}, metrics={"listen": ""},
                      daemon={"seeds": str(seeds), "max_cycles": 2, "idle_sleep": 0.2})
    on_s3 = with_overrides(on_s3, fetcher={"per_host_concurrency": 1})

    run_daemon(on_s3)

    assert "daemon.overlap" in "".join(capfd.readouterr())  # a segment started while another was fetching
    slow_page = next(r for r in a.requests if r.path_qs == "/")
    assert c.requests and c.requests[0].started < slow_page.finished  # c's segment ran beside a's
    got = CrawlerConfig.model_validate({"crawl_dir": str(mirror(s3, bucket, "crawl", tmp_path / "got"))})
    assert sorted(url for url, status in pages(got) if status == "fetched") == sorted(s.url("/") for s in three_sites)
    assert len(webdb_tables(got)["merged"]) == len(linkdb_store(got).require_current().merged_segments) == 2
