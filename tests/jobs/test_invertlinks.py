from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
import structlog

from crawler.errors import SegmentError, WebDbError
from crawler.jobs.invertlinks import invertlinks
from crawler.jobs.readlinkdb import dump_linkdb, inlinks_of

from .conftest import T1, fetch, make_cfg, parse

LOG = structlog.get_logger()
A, A2, B, C = "http://a.example/", "http://a.example/2", "http://b.example/", "http://c.example/"


def inlinks(cfg, url: str) -> list[tuple[str, str]]:
    return [(i["from_url"], i["anchor"]) for i in inlinks_of(cfg, url)["inlinks"]]


@pytest.fixture
def cfg(tmp_path):
    return make_cfg(tmp_path, linkdb={"ignore_internal": False})


def test_inverts_outlinks_with_first_anchor(cfg, make_segment):
    """Each link target lists its sources with the first anchor in page order; self-links are left out."""
    seg = make_segment(
        "20260101T010000000Z",
        [fetch(A), fetch(B)],
        [parse(A, [(C, "see C"), (C, "C again"), (A, "me"), (B, "to b")]), parse(B, [(C, "from b")])],
    )
    report = invertlinks(cfg, [seg], LOG)
    assert (report.version, report.sources, report.inlinks) == (1, 2, 3)
    assert inlinks(cfg, C) == [(A, "see C"), (B, "from b")]
    assert inlinks(cfg, "HTTP://B.EXAMPLE") == [(A, "to b")]
    assert inlinks(cfg, A) == []


def test_only_successful_fetches_count(cfg, make_segment):
    """Outlinks recorded for a page whose latest fetch failed are not inverted."""
    seg = make_segment("20260101T010000000Z", [fetch(A, "gone")], [parse(A, [(C, "c")])])
    assert invertlinks(cfg, [seg], LOG).inlinks == 0


def test_refetch_replaces_a_pages_inlinks_and_rerun_changes_nothing(cfg, make_segment):
    """A page parsed again replaces its earlier inlink rows; a segment already merged is skipped."""
    first = make_segment("20260101T010000000Z", [fetch(A), fetch(B)], [parse(A, [(C, "old")]), parse(B, [(C, "b")])])
    invertlinks(cfg, [first], LOG)
    second = make_segment(
        "20260102T010000000Z", [fetch(A, fetch_time=T1 + timedelta(days=1))], [parse(A, [(B, "new")])]
    )
    assert invertlinks(cfg, [second, first], LOG).version == 2
    assert inlinks(cfg, C) == [(B, "b")]
    assert inlinks(cfg, B) == [(A, "new")]
    again = invertlinks(cfg, [second], LOG)
    assert (again.version, again.segments) == (2, [])


def test_ignore_internal_and_cap(tmp_path, make_segment):
    """linkdb.ignore_internal drops same-host links; linkdb.max_inlinks keeps the first sources by URL."""
    cfg = make_cfg(tmp_path, linkdb={"ignore_internal": True, "max_inlinks": 2})
    sources = [f"http://s{i}.example/" for i in range(4)]
    seg = make_segment(
        "20260101T010000000Z",
        [fetch(A)] + [fetch(s) for s in sources],
        [parse(A, [(A2, "internal"), (B, "external")])] + [parse(s, [(C, s)]) for s in sources],
    )
    invertlinks(cfg, [seg], LOG)
    assert inlinks(cfg, A2) == []
    assert inlinks(cfg, B) == [(A, "external")]
    assert inlinks(cfg, C) == [(s, s) for s in sources[:2]]


def test_filters_apply_to_link_targets(tmp_path, make_segment):
    """Link targets the urls.* filters reject get no inlinks."""
    cfg = make_cfg(tmp_path, linkdb={"ignore_internal": False}, urls={"filters": [r"-^http://c\.", "+."]})
    seg = make_segment("20260101T010000000Z", [fetch(A)], [parse(A, [(B, "b"), (C, "c")])])
    invertlinks(cfg, [seg], LOG)
    assert inlinks(cfg, C) == [] and inlinks(cfg, B) == [(A, "b")]


def test_dump_one_record_per_url(cfg, make_segment):
    """The dump has one JSON record per linked URL, sorted, each with its inlinks."""
    seg = make_segment("20260101T010000000Z", [fetch(A), fetch(B)], [parse(A, [(C, "x"), (B, "y")]), parse(B, [(C, "z")])])
    invertlinks(cfg, [seg], LOG)
    out = io.StringIO()
    assert dump_linkdb(cfg, out) == 2
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows == [
        {"url": B, "inlinks": [{"from_url": A, "anchor": "y"}]},
        {"url": C, "inlinks": [{"from_url": A, "anchor": "x"}, {"from_url": B, "anchor": "z"}]},
    ]


def test_errors(cfg, make_segment):
    """An unfinished segment and a missing linkdb are clear errors."""
    with pytest.raises(WebDbError, match="invertlinks"):
        inlinks_of(cfg, A)
    seg = make_segment("20260101T010000000Z", [fetch(A)], fetch_done=False)
    with pytest.raises(SegmentError, match="fetch not finished"):
        invertlinks(cfg, [seg], LOG)
