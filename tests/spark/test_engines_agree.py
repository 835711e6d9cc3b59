"""The crawl-database jobs give the same webdb, linkdb, fetchlists and segments on Spark as on DuckDB."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import structlog

from crawler.config import CrawlerConfig
from crawler.jobs.dedup import dedup
from crawler.jobs.generate import generate
from crawler.jobs.inject import inject
from crawler.jobs.invertlinks import invertlinks, linkdb_store
from crawler.jobs.updatedb import updatedb
from crawler.jobs.updatesegs import updatesegs
from crawler.segments.layout import list_segments
from crawler.webdb.store import VersionedStore
from tests.conftest import ONE_LEVEL_A_ROUND, run_crawler
from tests.jobs.conftest import NOW, fetch, page, parse, write_db

from .conftest import spark_cfg


@pytest.fixture
def crawl_args(crawl_args: list[str]) -> list[str]:
    """These tests count what each round fetches: one link level a round (tests/conftest.py)."""
    return [*crawl_args, *ONE_LEVEL_A_ROUND]

LOG = structlog.get_logger()
# Settings that reach the less common paths: adaptive schedule, filter rules, caps per host and per URL.
SECTIONS: dict[str, Any] = {
    "db": {"schedule": "adaptive"},
    "urls": {"filters": [r"-\.(png|jpg)$", "+."]},
    "linkdb": {"max_inlinks": 3, "ignore_internal": False},
    "generate": {"max_per_host": 5, "partitions": 3},
}


def rows(files: list[Path], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """All rows of ``files``, sorted by ``keys``; floats rounded (sums may add in another order)."""
    table = [r for f in files for r in pq.read_table(f).to_pylist()]
    for r in table:
        for k, v in r.items():
            if isinstance(v, float):
                r[k] = round(v, 9)
    return sorted(table, key=lambda r: tuple(str(r[k]) for k in keys))


def schemas(files: list[Path]) -> set[str]:
    return {str(pq.read_schema(f).remove_metadata()) for f in files}


def webdb_tables(cfg: CrawlerConfig) -> dict[str, Any]:
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    pages = sorted((version.path / "pages").glob("*.parquet"))
    links = sorted((version.path / "links").glob("*.parquet"))
    return {
        "pages": rows(pages, ("url",)), "links": rows(links, ("from_url", "to_url")),
        "schemas": schemas(pages) | schemas(links), "merged": version.merged_segments,
    }


def run_jobs(cfg: CrawlerConfig) -> dict[str, Any]:
    """updatedb, invertlinks, dedup, updatesegs on the crawled segment, then the next generate."""
    segment = list_segments(cfg.crawl_path / "segments")[0]
    updatedb(cfg, [segment], LOG, now=NOW)
    invertlinks(cfg, [segment], LOG)
    dedup(cfg, LOG)
    updatesegs(cfg, [segment], LOG)
    report = generate(cfg, LOG, now=NOW + timedelta(days=400))
    inlinks = sorted((linkdb_store(cfg).require_current().path / "inlinks").glob("*.parquet"))
    fetchlist = report.segment.parts("fetchlist")
    return {
        **webdb_tables(cfg),
        "inlinks": rows(inlinks, ("to_url", "from_url")),
        "fetcher": rows(segment.parts("fetcher"), ("url", "fetch_time")),
        "fetchlist": {f.name: rows([f], ("url",)) for f in fetchlist},
        "more schemas": schemas(inlinks) | schemas(segment.parts("fetcher")) | schemas(fetchlist),
    }


async def test_jobs_after_a_real_fetch_agree(demo_site, crawl_args, tmp_path, spark):
    """After one fetched round of the demo site, every database job writes the same rows on both engines."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{demo_site.base_url}/\n")
    duck_dir = tmp_path / "duck"
    args = [*crawl_args, "-D", f"crawl_dir={duck_dir}"]
    assert (await run_crawler("inject", str(seeds), *args)).code == 0
    generated = await run_crawler("generate", *args)
    assert generated.code == 0, generated.stderr
    fetched = await run_crawler("fetch", generated.stdout.strip(), *args)
    assert fetched.code == 0, fetched.stderr
    spark_dir = tmp_path / "spark"
    shutil.copytree(duck_dir, spark_dir)

    duck = run_jobs(CrawlerConfig.model_validate({"crawl_dir": str(duck_dir), **SECTIONS}))
    on_spark = run_jobs(spark_cfg(spark_dir, **SECTIONS))

    assert len(duck["pages"]) > 5 and duck["inlinks"] and duck["fetchlist"]
    for table in duck:
        assert on_spark[table] == duck[table], table


def test_inject_agrees(tmp_path, spark):
    """Injecting seeds (new, known, filtered) into a webdb gives the same pages on both engines."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/\nhttp://b.example/x\nhttp://a.example/logo.png\n")
    more = tmp_path / "more.txt"
    more.write_text("http://a.example/\nhttp://c.example/\n")
    results = []
    for cfg in (
        CrawlerConfig.model_validate({"crawl_dir": str(tmp_path / "duck"), **SECTIONS}),
        spark_cfg(tmp_path / "spark", **SECTIONS),
    ):
        first, second = inject(cfg, seeds, LOG), inject(cfg, more, LOG)
        tables = webdb_tables(cfg)
        for row in tables["pages"]:
            row.pop("next_fetch")  # "now" at inject time
        results.append(((first.injected, second.injected, second.known), tables))
    assert results[0] == results[1]
    assert results[0][0] == (2, 1, 1)


def test_outlink_caps_agree(tmp_path, spark, cfg, make_segment):
    """Pages over db.max_outlinks, a sitemap over sitemap.max_urls, robots.txt Sitemap: URLs (linked past the cap,
    alone, external): the same links kept and the same counts of the cut on both engines."""
    site = "http://site.example"
    sitemap = f"{site}/sitemap.xml"

    def links(prefix: str, count: int) -> list[tuple[str, str]]:
        return [(f"{site}/{prefix}{i}", "a") for i in range(count)]

    def with_robots(url: str, page_links: list[tuple[str, str]], sitemaps: list[str]) -> dict[str, Any]:
        row = parse(url, page_links + [(u, "sitemap") for u in sitemaps])
        row["metadata"] = [("robots_sitemaps", str(len(sitemaps)))]
        return row

    rows = [
        parse(f"{site}/a", links("p", 120) + links("x", 20) + links("p", 150)),
        parse(sitemap, links("s", 150), metadata=[("sitemap", "urlset"), ("content_type", "application/xml")]),
        with_robots(f"{site}/c", links("p", 110) + [(sitemap, "map")] + links("q", 10), [sitemap]),
        with_robots(f"{site}/d", [], ["http://cdn.example/sitemap.xml", sitemap]),
        parse(f"{site}/e", links("p", 3), metadata=[("robots_sitemaps", "junk")]),
    ]
    write_db(cfg, [page(r["url"]) for r in rows])
    make_segment("20260101T010000000Z", [fetch(r["url"]) for r in rows], rows)
    sections = {"db": {"max_outlinks": 100, "ignore_external_links": True}, "sitemap": {"max_urls": 120},
                "urls": {"filters": ["-/x", "+."]}}
    results = []
    for engine, run_cfg in (("duck", CrawlerConfig.model_validate({"crawl_dir": str(tmp_path / "duck"), **sections})),
                            ("spark", spark_cfg(tmp_path / "spark", **sections))):
        for folder in ("webdb", "segments"):
            shutil.copytree(tmp_path / folder, tmp_path / engine / folder)
        report = updatedb(run_cfg, list_segments(run_cfg.crawl_path / "segments"), LOG, now=NOW)
        results.append((report.over_cap, webdb_tables(run_cfg)))
    assert results[1] == results[0]
    assert results[0][0] == {"outlinks": 70, "sitemap_urls": 30, "pages": 3}
