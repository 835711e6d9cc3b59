from __future__ import annotations

import io
import json

import pytest
import structlog

from crawler.errors import SegmentError
from crawler.jobs.invertlinks import invertlinks
from crawler.jobs.readseg import dump_segment, get_record, segment_summaries
from crawler.jobs.updatedb import updatedb
from crawler.jobs.updatesegs import updatesegs

from .conftest import NOW, fetch, make_cfg, page, parse, write_db

A, B = "http://a.example/", "http://b.example/"


def dump(seg) -> list[dict]:
    out = io.StringIO()
    count = dump_segment(seg, out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert count == len(rows)
    return rows


def test_dump_joins_fetch_and_parse(make_segment):
    """Each fetched URL is dumped once with its fetch fields, parse data (outlinks, metadata) and text."""
    seg = make_segment(
        "20260101T010000000Z",
        [fetch(B, "gone"), fetch(A, etag='"e"')],
        [parse(A, [("http://c.example/", "C")], metadata=[("description", "about a")])],
        [{"url": A, "text": "hello world"}],
    )
    rows = dump(seg)
    assert [r["url"] for r in rows] == [A, B]
    a, b = rows
    assert (a["status"], a["http_status"], a["content_type"], a["fetch_time"]) == (
        "success",
        200,
        "text/html",
        "2026-01-01T01:00:00Z",
    )
    assert (a["title"], a["text"], a["parse_status"]) == (f"title of {A}", "hello world", "success")
    assert a["outlinks"] == [{"url": "http://c.example/", "anchor": "C"}]
    assert a["metadata"] == {"description": "about a"}
    assert (b["status"], b["http_status"], b["title"], b["outlinks"], b["text"]) == (
        "gone",
        404,
        None,
        None,
        None,
    )
    assert {"digest", "redirect_url", "reason"} <= set(a)


def test_dump_without_parse_outputs(make_segment):
    """A segment fetched without parsing dumps its fetch records with empty parse fields."""
    rows = dump(make_segment("20260101T010000000Z", [fetch(A)]))
    assert len(rows) == 1 and rows[0]["title"] is None and rows[0]["text"] is None


def test_segment_without_fetcher_parts_dumps_nothing(make_segment):
    """A generated but unfetched segment dumps no records and get_record finds nothing."""
    seg = make_segment("20260101T010000000Z", fetchlist=[A])
    assert dump(seg) == []
    assert get_record(seg, A) is None


def test_get_record(make_segment):
    """get_record returns one URL's dump object, also when given an unnormalized spelling."""
    seg = make_segment("20260101T010000000Z", [fetch(A), fetch(B)], [parse(A)], [{"url": A, "text": "t"}])
    record = get_record(seg, "HTTP://A.EXAMPLE")
    assert record is not None and record["url"] == A and record["text"] == "t"
    assert get_record(seg, "http://nope.example/") is None


def test_summaries(cfg, make_segment):
    """The segment list shows each segment's state, whether it is merged, and its record counts."""
    write_db(cfg, [page(A), page(B)])
    fetched = make_segment("20260101T010000000Z", [fetch(A), fetch(B, "gone")], [parse(A)])
    make_segment("20260101T020000000Z", fetchlist=[A, B])
    updatedb(cfg, [fetched], structlog.get_logger(), now=NOW)
    summaries = segment_summaries(cfg)
    assert [
        (s["name"], s["state"], s["merged"], s["fetchlist"], s["fetched"], s["parsed"]) for s in summaries
    ] == [
        ("20260101T010000000Z", "fetched", True, 2, 2, 1),
        ("20260101T020000000Z", "generated", False, 2, 0, 0),
    ]
    assert summaries[0]["path"] == str(fetched.path)
    assert [s["failed"] for s in summaries] == [1, 0]


def test_corrupt_part_names_the_file(make_segment):
    """A corrupt fetcher part raises SegmentError naming the file instead of a bare engine error."""
    seg = make_segment("20260101T010000000Z", [fetch(A)])
    (seg.dir("fetcher") / "part-00000-00009.parquet").write_bytes(b"garbage")
    with pytest.raises(SegmentError, match="part-00000-00009.parquet"):
        dump_segment(seg, io.StringIO())


def test_dump_shows_score_and_anchors_after_updatesegs(tmp_path, make_segment):
    """Once updatesegs has run, each dumped record also has its webdb score and inlink anchors; before, neither key."""
    cfg = make_cfg(tmp_path, linkdb={"ignore_internal": False})
    write_db(cfg, [page(A, score=2.5), page(B, score=0.5)])
    seg = make_segment("20260101T010000000Z", [fetch(A), fetch(B)], [parse(A, [(B, "bee")]), parse(B, [])])
    assert not {"score", "anchors"} & set(dump(seg)[0])
    invertlinks(cfg, [seg], structlog.get_logger())
    updatesegs(cfg, [seg], structlog.get_logger())
    rows = {r["url"]: r for r in dump(seg)}
    assert (rows[A]["score"], rows[A]["anchors"], rows[B]["score"], rows[B]["anchors"]) == (2.5, None, 0.5, ["bee"])
    assert {"url", "http_status", "content_type", "title", "outlinks", "text"} <= set(rows[A])
    assert get_record(seg, B)["anchors"] == ["bee"]
