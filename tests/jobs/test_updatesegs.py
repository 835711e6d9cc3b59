from __future__ import annotations

import io
import os

import pyarrow.parquet as pq
import pytest
import structlog

from crawler.errors import SegmentError
from crawler.jobs.invertlinks import invertlinks
from crawler.jobs.readseg import dump_segment
from crawler.jobs.updatesegs import updatesegs
from crawler.models import FETCHER_UPDATED
from crawler.segments.check import parquet_damage
from tests.damage import garble_a_page

from .conftest import fetch, make_cfg, page, parse, write_db

LOG = structlog.get_logger()
A, B, C = "http://a.example/", "http://b.example/", "http://c.example/"


def records(seg) -> dict[str, dict]:
    rows = {}
    for part in seg.parts("fetcher"):
        table = pq.read_table(part)
        assert table.schema.equals(FETCHER_UPDATED)
        rows.update({r["url"]: r for r in table.to_pylist()})
    return rows


@pytest.fixture
def cfg(tmp_path):
    return make_cfg(tmp_path, linkdb={"ignore_internal": False})


@pytest.fixture
def segment(cfg, make_segment):
    write_db(cfg, [page(A, score=2.5), page(B, score=0.5)])
    seg = make_segment(
        "20260101T010000000Z",
        [fetch(A), fetch(B), fetch(C, "gone")],
        [parse(A, [(B, "bee"), (C, "")]), parse(B, [(A, "home")])],
    )
    other = make_segment("20260101T020000000Z", [fetch(C)], [parse(C, [(B, "bee"), (A, "start")])])
    invertlinks(cfg, [seg, other], LOG)
    return seg


def test_adds_score_and_anchors_to_every_fetch_record(cfg, segment):
    """Each fetcher record gains the webdb score and the distinct non-empty anchors of its inlinks."""
    before = {u: {k: r[k] for k in ("status", "http_status", "digest")} for u, r in records_plain(segment).items()}
    report = updatesegs(cfg, [segment], LOG)
    rows = records(segment)
    assert report.records == 3
    assert (rows[A]["score"], rows[A]["anchors"]) == (2.5, ["home", "start"])
    assert (rows[B]["score"], rows[B]["anchors"]) == (0.5, ["bee"])
    assert (rows[C]["score"], rows[C]["anchors"]) == (None, None)
    assert {u: {k: r[k] for k in ("status", "http_status", "digest")} for u, r in rows.items()} == before
    assert segment.is_done("fetcher")
    assert not [p for p in segment.path.iterdir() if p.name.startswith(".tmp-")]


def records_plain(seg) -> dict[str, dict]:
    return {r["url"]: r for part in seg.parts("fetcher") for r in pq.read_table(part).to_pylist()}


def test_rerun_and_readers_still_work(cfg, segment):
    """Running it twice gives the same columns, and readseg still dumps the segment."""
    updatesegs(cfg, [segment], LOG)
    first = records(segment)
    updatesegs(cfg, [segment], LOG)
    assert records(segment) == first
    out = io.StringIO()
    assert dump_segment(segment, out) == 3


def test_repairs_a_swap_cut_off_between_renames(cfg, segment):
    """A run killed between the two renames of the fallback swap is repaired: the parked fetcher/ comes back."""
    parked = segment.path / ".tmp-fetcher-old.999999"
    os.rename(segment.dir("fetcher"), parked)
    (segment.path / ".tmp-fetcher-new.999999").mkdir()
    updatesegs(cfg, [segment], LOG)
    assert records(segment)[A]["score"] == 2.5
    assert not [p for p in segment.path.iterdir() if p.name.startswith(".tmp-")]


def test_unfinished_segment_is_refused(cfg, make_segment):
    """A segment whose fetch is not finished is refused, naming it."""
    write_db(cfg, [page(A)])
    seg = make_segment("20260101T030000000Z", [fetch(A)], fetch_done=False)
    with pytest.raises(SegmentError, match="fetch not finished"):
        updatesegs(cfg, [seg], LOG)


def test_rewritten_parts_keep_their_page_checksums(cfg, segment):
    """The fetcher parts updatesegs writes carry page CRCs like the fetcher's own: a garbled page is found."""
    updatesegs(cfg, [segment], LOG)
    part = segment.parts("fetcher")[0]
    garble_a_page(part)
    assert parquet_damage(part) is None
    assert "CRC" in (parquet_damage(part, deep=True) or "")
