from __future__ import annotations

import hashlib
import io
import json
from datetime import timedelta

import pyarrow.parquet as pq
import pytest
import structlog

from crawler.errors import SegmentError, WebDbError
from crawler.jobs.engine import open_engine
from crawler.jobs.invertlinks import (
    bucket_count,
    hash_sql,
    inlink_parts,
    invertlinks,
    linkdb_store,
    unlinked_segments,
)
from crawler.jobs.readlinkdb import dump_linkdb, inlinks_of
from crawler.jobs.sql import sql_string
from crawler.models import INLINKS

from .conftest import T1, fetch, make_cfg, page, parse, write_db, write_parquet

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


def bucket_of(url: str, buckets: int) -> int:
    return int(hashlib.md5(url.encode()).hexdigest()[:4], 16) % buckets


def bucket_layout(cfg) -> tuple[int, dict[str, list[dict]]]:
    """The live linkdb's bucket count and the rows of each part file, in file order."""
    version = linkdb_store(cfg).require_current()
    return version.meta["buckets"], {p.name: pq.read_table(p).to_pylist() for p in inlink_parts(version)}


def test_buckets_hold_each_target_whole_and_sorted(tmp_path, make_segment):
    """With many buckets each target's inlinks sit in the part of its hash bucket, sorted, capped, none lost."""
    cfg = make_cfg(tmp_path, linkdb={"ignore_internal": False, "bucket_rows": 8, "max_inlinks": 5})
    sources = [f"http://s{i}.example/" for i in range(8)]
    targets = [f"http://t{i}.example/x" for i in range(6)]
    seg = make_segment(
        "20260101T010000000Z", [fetch(s) for s in sources], [parse(s, [(t, f"{s}>{t}") for t in targets]) for s in sources]
    )
    assert invertlinks(cfg, [seg], LOG).inlinks == 6 * 5
    buckets, parts = bucket_layout(cfg)
    assert buckets == 8  # 48 inlinks at 8 a bucket: the next power of two of 6
    assert sorted(parts) == [f"part-{b:05d}.parquet" for b in range(8)]
    for name, rows in parts.items():
        assert all(bucket_of(r["to_url"], 8) == int(name[5:10]) for r in rows)
        assert [(r["to_url"], r["from_url"]) for r in rows] == sorted((r["to_url"], r["from_url"]) for r in rows)
    for t in targets:
        assert inlinks(cfg, t) == [(s, f"{s}>{t}") for s in sources[:5]]


def test_merge_across_bucket_counts(tmp_path, make_segment):
    """A version merges into one with more buckets, then fewer, keeping old rows and replacing refetched pages'."""
    sources = [f"http://s{i}.example/" for i in range(6)]
    targets = [f"http://t{i}.example/" for i in range(5)]
    first = make_segment("20260101T010000000Z", [fetch(s) for s in sources],
                         [parse(s, [(t, "old") for t in targets]) for s in sources])
    invertlinks(make_cfg(tmp_path, linkdb={"ignore_internal": False}), [first], LOG)
    many = make_cfg(tmp_path, linkdb={"ignore_internal": False, "bucket_rows": 5})
    assert bucket_layout(many)[0] == 1
    later = T1 + timedelta(days=1)
    second = make_segment("20260102T010000000Z", [fetch(sources[0], fetch_time=later)],
                          [parse(sources[0], [(targets[0], "new"), (C, "new")])])
    invertlinks(many, [second], LOG)
    assert bucket_layout(many)[0] == 8  # 30 old and 2 new inlinks at 5 a bucket
    expected = {t: [(s, "old") for s in sources[1:]] for t in targets}
    expected[targets[0]] = sorted([(sources[0], "new"), *expected[targets[0]]])
    expected[C] = [(sources[0], "new")]
    assert {t: inlinks(many, t) for t in expected} == expected
    few = make_cfg(tmp_path, linkdb={"ignore_internal": False, "bucket_rows": 14})
    third = make_segment("20260103T010000000Z", [fetch(sources[1], fetch_time=later)], [parse(sources[1], [])])
    invertlinks(few, [third], LOG)
    assert bucket_layout(few)[0] == 2  # 27 old inlinks at 14 a bucket
    expected = {t: [i for i in links if i[0] != sources[1]] for t, links in expected.items()}
    assert {t: inlinks(few, t) for t in expected} == expected


def test_version_from_before_buckets_is_merged(tmp_path, make_segment):
    """A linkdb version without a bucket count (parts in any order) merges into a bucketed one."""
    cfg = make_cfg(tmp_path, linkdb={"ignore_internal": False, "bucket_rows": 1})
    store = linkdb_store(cfg)
    old = [{"to_url": B, "from_url": A, "anchor": "a"}, {"to_url": C, "from_url": A, "anchor": "a"},
           {"to_url": C, "from_url": B, "anchor": "b"}]
    with store.lock(), store.new_version({"merged_segments": ["20251231T010000000Z"]}) as temp:
        write_parquet(temp / "inlinks" / "part-00000.parquet", INLINKS, old[1:])
        write_parquet(temp / "inlinks" / "part-00000-00001.parquet", INLINKS, old[:1])
    seg = make_segment("20260101T010000000Z", [fetch(B)], [parse(B, [(A, "from b")])])
    invertlinks(cfg, [seg], LOG)
    assert bucket_layout(cfg)[0] == 4
    assert (inlinks(cfg, A), inlinks(cfg, B), inlinks(cfg, C)) == ([(B, "from b")], [(A, "a")], [(A, "a")])


def test_hash_sql_is_md5s_first_16_bits(cfg):
    """The SQL bucket hash is the first four hex digits of the URL's MD5, as the tests compute it."""
    urls = [A, B, C, "http://\u00e9.example/\u00fc"]
    con = open_engine(cfg)
    try:
        got = [con.rows(f"SELECT {hash_sql(sql_string(u))}")[0][0] for u in urls]
    finally:
        con.close()
    assert got == [bucket_of(u, 1 << 16) for u in urls]
    assert [bucket_count(n, 10) for n in (0, 10, 11, 40, 41)] == [1, 1, 2, 4, 8]


def test_unlinked_segments_are_merged_into_the_webdb_only(cfg, make_segment):
    """Segments the webdb merged and the linkdb did not, still on disk with their fetch done, oldest first."""
    names = ["20260101T010000000Z", "20260102T010000000Z", "20260103T010000000Z", "20260104T010000000Z"]
    first, second, _ = (make_segment(n, [fetch(A)], [parse(A, [(B, "b")])]) for n in names[:3])
    make_segment(names[3], [fetch(A)], fetch_done=False)
    write_db(cfg, [page(A)], merged=names[:2])
    assert [s.name for s in unlinked_segments(cfg)] == names[:2]
    invertlinks(cfg, [first], LOG)
    write_db(cfg, [page(A)], merged=[*names, "20251231T010000000Z"])  # the last one since deleted
    assert [s.name for s in unlinked_segments(cfg)] == names[1:3]
