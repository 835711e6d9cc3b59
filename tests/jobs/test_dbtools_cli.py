"""The database tools on the command line: results on stdout, one-line errors, exit codes."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.conftest import run_crawler

from .conftest import fetch, page, parse, write_db

A, B = "http://a.example/", "http://b.example/"


async def test_invertlinks_readlinkdb_dedup_updatesegs(cfg, make_segment):
    """invertlinks, readlinkdb, dedup and updatesegs run from the CLI and print only results on stdout."""
    write_db(cfg, [page(A, status="fetched", digest="1" * 32, score=2.0), page(B, status="fetched", digest="1" * 32)])
    seg = make_segment("20260101T010000000Z", [fetch(A)], [parse(A, [(B, "bee")])])
    args = ["-D", f"crawl_dir={cfg.crawl_path}", "-D", "log.format=json"]

    inverted = await run_crawler("invertlinks", str(seg.path), *args)
    assert (inverted.code, inverted.stdout) == (0, ""), inverted.stderr
    assert any(e["event"] == "invertlinks.done" for e in inverted.events())
    one = await run_crawler("readlinkdb", "--url", B, *args)
    assert json.loads(one.stdout) == {"url": B, "inlinks": [{"from_url": A, "anchor": "bee"}]}
    dump = await run_crawler("readlinkdb", "--dump", *args)
    assert [json.loads(line)["url"] for line in dump.stdout.splitlines()] == [B]

    deduped = await run_crawler("dedup", *args)
    assert deduped.code == 0, deduped.stderr
    dups = await run_crawler("readdb", "--dump", "--status", "duplicate", *args)
    assert [json.loads(line)["url"] for line in dups.stdout.splitlines()] == [B]

    updated = await run_crawler("updatesegs", str(seg.path), *args)
    assert updated.code == 0, updated.stderr
    row = pq.read_table(seg.parts("fetcher")[0]).to_pylist()[0]
    assert (row["url"], row["score"], row["anchors"]) == (A, 2.0, None)


async def test_readlinkdb_needs_one_mode(cfg):
    """readlinkdb without --url or --dump, or readdb --status without --dump, exits 2 with one line."""
    for argv in (["readlinkdb"], ["readdb", "--stats", "--status", "gone"]):
        result = await run_crawler(*argv, "-D", f"crawl_dir={cfg.crawl_path}")
        assert result.code == 2 and len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""
