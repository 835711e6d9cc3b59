"""The spider-trap SQL (crawler/jobs/traps.py) on Spark: the same trap found, the same URLs held back."""

from __future__ import annotations

import pyarrow.parquet as pq

from crawler.jobs.generate import generate
from crawler.jobs.updatedb import updatedb
from crawler.webdb.store import VersionedStore
from tests.jobs.conftest import NOW, T0, fetch, page, parse, write_db
from tests.jobs.test_traps import BOILERPLATE, LATER, LOG, SEG, H, _tree
from tests.spark.conftest import spark_cfg


def test_traps_on_spark(tmp_path, make_segment, spark):
    """A duplicate linked from its original is not followed; a near-duplicate tree at '/' becomes a suspected
    trap whose growth generate holds back, while the site's real pages are selected."""
    cfg = spark_cfg(tmp_path)
    real = [f"{H}/blog/post.html"]
    old = page(f"{H}/x/", status="fetched", digest="e" * 32, fetch_time=T0, next_fetch=LATER)
    write_db(cfg, [page(u) for u in real] + [old],
             links=[{"from_url": f"{H}/x/", "to_url": f"{H}/x/y/", "anchor": ""}])
    texts = {u: f"{BOILERPLATE} you are at {u}" for u in _tree(f"{H}/", 2)}
    fetched = [fetch(u, digest=f"{i:032x}") for i, u in enumerate(texts)] + [fetch(f"{H}/x/y/", digest="e" * 32)]
    parsed = [parse(u, [(f"{u}{c}/", c) for c in ("a", "b", "next")]) for u in [*texts, f"{H}/x/y/"]]
    seg = make_segment(SEG, fetched, parsed, [{"url": u, "text": t} for u, t in texts.items()])
    report = updatedb(cfg, [seg], LOG, now=NOW)
    assert report.unfollowed == (1, 3)
    version = VersionedStore(cfg.crawl_path / "webdb").require_current()
    assert [t["prefix"] for t in version.meta.get("traps", [])] == [f"{H}/"]
    result = generate(cfg, LOG, now=NOW)
    selected = {r["url"] for p in result.segment.parts("fetchlist") for r in pq.read_table(p).to_pylist()}
    assert selected == set(real)
