"""The segment layout's names (fixed by DESIGN.md) and the fetch-finished checks built on them."""

from __future__ import annotations

import pytest

from crawler.errors import SegmentError
from crawler.segments.layout import (
    Segment,
    commit_number,
    done_name,
    fetch_progress,
    file_partition,
    part_name,
    part_numbers,
    partition_prefix,
    require_fetched,
)


@pytest.mark.parametrize(("args", "name"), [
    ((3,), "part-00003.parquet"),
    ((3, 12), "part-00003-00012.parquet"),
    ((0, 0, "warc.gz"), "part-00000-00000.warc.gz"),
    ((123456, 7), "part-123456-00007.parquet"),
])
def test_part_names_round_trip(args, name):
    assert part_name(*args) == name
    assert part_numbers(name) == (args[0], args[1] if len(args) > 1 else None)


@pytest.mark.parametrize(("name", "seq"), [
    ("part-00003-00012.parquet", 12),
    ("part-00003-00012.warc.gz", 12),
    ("part-00003.parquet", None),
    ("part-00003-xyz.parquet", None),
    (".tmp-part-00003-00001.parquet.9", None),
    ("_done-00003", None),
])
def test_commit_number(name, seq):
    assert commit_number(name) == seq


@pytest.mark.parametrize(("rel", "partition"), [
    ("fetcher/part-00003-00001.parquet", 3),
    ("content/part-00010-00000.warc.gz", 10),
    ("fetchlist/part-00002.parquet", 2),
    ("fetcher/_done-00004", 4),
    ("fetcher/_SUCCESS", None),
    ("part-00003-00001.parquet", None),  # not below an output
    ("fetcher/.tmp-part-00003-00001.parquet.1", None),
])
def test_file_partition(rel, partition):
    assert file_partition(rel) == partition


def test_fixed_names():
    assert done_name(7) == "_done-00007"
    assert partition_prefix(7) == "part-00007-"


@pytest.mark.parametrize(("listing", "expected"), [
    ([], ([], set())),
    (["fetchlist/part-00001.parquet", "fetchlist/part-00000.parquet", "fetchlist/_SUCCESS"], ([0, 1], set())),
    (["fetchlist/part-00000.parquet", "fetcher/_done-00000", "fetcher/part-00000-00000.parquet",
      "content/_done-00001", "fetchlist/part-00000-00001.parquet"], ([0], {0})),
])
def test_fetch_progress(listing, expected):
    assert fetch_progress(iter(listing)) == expected


def test_a_segment_fetch_finishes_partition_by_partition(tmp_path):
    seg = Segment(tmp_path / "20260101T000000000Z")
    assert seg.state == "incomplete"
    for partition in (1, 0):
        seg.fetchlist_part(partition).parent.mkdir(parents=True, exist_ok=True)
        seg.fetchlist_part(partition).write_bytes(b"")
    seg.mark_done("fetchlist")
    assert seg.fetchlist_partitions() == [0, 1]
    assert seg.state == "generated" and not seg.fetched
    seg.dir("fetcher").mkdir()
    seg.mark_partition_fetched(1)
    assert (seg.path / "fetcher" / "_done-00001").is_file()
    assert [seg.partition_fetched(p) for p in (0, 1)] == [False, True]
    assert seg.state == "fetching"
    with pytest.raises(SegmentError, match=r"fetch not finished \(no fetcher/_SUCCESS\)"):
        require_fetched(seg)
    seg.mark_done("fetcher")
    assert seg.fetched and seg.state == "fetched"
    require_fetched(seg)
