"""What a staging copy keeps: a fetch or a reader leaves nothing published behind, and the bucket is the truth."""

from __future__ import annotations

import fcntl
import os

import structlog

from crawler.config import StorageConfig
from crawler.crawldir import Remote
from crawler.storage.bucket import Bucket
from crawler.storage.lease import Lease
from crawler.storage.partition_lease import PartitionLeases, partition_lease_key
from crawler.storage.segments import SegmentSync
from tests.conftest import run_crawler
from tests.storage.conftest import keys, staging_args
from tests.storage.test_partition_lease import make_segment

NAME = "20261130T010203004Z"


def _segments(staging) -> list[str]:
    folder = staging / "segments"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


async def test_fetch_and_readers_leave_no_published_segment_in_staging(tmp_path, demo_site, s3, bucket, s3_endpoint):
    """A fetch drops its published segment unless another command shares staging; readers leave old copies neither."""
    name, resolve = await make_segment(tmp_path, demo_site, s3_endpoint, bucket)
    b, c = ([*staging_args(tmp_path / m, s3_endpoint, bucket), "-D", f"http.resolve={resolve}"]
            for m in ("staging-b", "staging-c"))
    staging_b = tmp_path / "staging-b" / "s3" / bucket / "crawl"
    # Another command on B's machine holds the staging copy (shared, as a reader or another partition's fetch does).
    (staging_b / ".storage").mkdir(parents=True)
    fd = os.open(staging_b / ".storage" / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        first = await run_crawler("fetch", name, "--partition", "0", *b)
        assert first.code == 0, first.stderr[-2000:]
        assert _segments(staging_b) == [name]  # the other command may still need it
    finally:
        os.close(fd)
    second = await run_crawler("fetch", name, "--partition", "1", *b)
    assert second.code == 0, second.stderr[-2000:]
    assert _segments(staging_b) == []  # alone now, and every file is in the bucket
    assert not (staging_b / ".storage" / "segments" / f"{name}.json").exists()
    assert f"crawl/segments/{name}/fetcher/_SUCCESS" in keys(s3, bucket, f"crawl/segments/{name}/")

    # A reader pulls the whole segment, reads it, and leaves nothing behind to be taken for current later.
    dumped = await run_crawler("readseg", "--dump", name, *c)
    assert dumped.code == 0, dumped.stderr[-2000:]
    assert dumped.stdout.count('"url"') >= 16
    staging_c = tmp_path / "staging-c" / "s3" / bucket / "crawl"
    assert _segments(staging_c) == []

    # A reader of the webdb keeps the live version and the one before, as a writer's staging copy does.
    a = [*staging_args(tmp_path / "staging-a", s3_endpoint, bucket), "-D", f"http.resolve={resolve}"]
    for n in range(2):
        (tmp_path / f"more-{n}.txt").write_text(f"http://new{n}.test/\n")
        assert (r := await run_crawler("inject", str(tmp_path / f"more-{n}.txt"), *a)).code == 0, r.stderr[-2000:]
        assert (r := await run_crawler("readdb", "--stats", *c)).code == 0, r.stderr[-2000:]
    assert sorted(p.name for p in (staging_c / "webdb").iterdir() if p.name.startswith("v")) == [
        "v000002", "v000003"]


def _write(path, data: bytes = b"data") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_pull_follows_the_bucket_and_keeps_what_is_unpublished(tmp_path, s3, s3_endpoint, bucket):
    """A pull drops staging files and segments the bucket no longer has, but never a file written here."""
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    writer, reader = SegmentSync(store, tmp_path / "a"), SegmentSync(store, tmp_path / "b")
    seg_a, seg_b = tmp_path / "a" / "segments" / NAME, tmp_path / "b" / "segments" / NAME
    for rel in ("parse_text/part-00000.parquet", "parse_text/part-00001.parquet", "parse_text/_SUCCESS"):
        _write(seg_a / rel)
    writer.publish()
    reader.pull([NAME])
    _write(seg_b / "parse_text" / "part-00009.parquet")  # written on B, not published
    # Re-parsed on A with one part: the bucket loses part-00001.
    (seg_a / "parse_text" / "part-00001.parquet").unlink()
    _write(seg_a / "parse_text" / "part-00000.parquet", b"newer")
    os.utime(seg_a / "parse_text" / "_SUCCESS", ns=(1, 1))
    writer.publish()
    reader.pull([NAME])
    assert sorted(p.name for p in (seg_b / "parse_text").iterdir()) == ["_SUCCESS", "part-00000.parquet",
                                                                       "part-00009.parquet"]
    assert (seg_b / "parse_text" / "part-00000.parquet").read_bytes() == b"newer"

    # Pruned from the bucket elsewhere: a listing reader forgets it, unless it holds something unpublished.
    other = "20261130T020203004Z"
    _write(tmp_path / "b" / "segments" / other / "fetchlist" / "_SUCCESS")
    writer.delete([NAME])
    assert reader.forget_gone(reader.remote_names()) == []  # both hold files never published
    (seg_b / "parse_text" / "part-00009.parquet").unlink()
    assert reader.forget_gone(reader.remote_names()) == [NAME]
    assert _segments(tmp_path / "b") == [other]


def test_leftovers_of_a_partition_done_elsewhere_are_dropped_unless_its_lease_is_held(tmp_path, s3, s3_endpoint,
                                                                                      bucket):
    """A dead fetch's unpublished files of a partition another machine finished go at the pull; a held lease keeps them."""
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    seg_a, seg_b = tmp_path / "a" / "segments" / NAME, tmp_path / "b" / "segments" / NAME
    for rel in ("fetchlist/part-00000.parquet", "fetchlist/part-00001.parquet", "fetchlist/_SUCCESS",
                "fetcher/part-00000-00000.parquet", "fetcher/part-00000-00001.parquet", "fetcher/_done-00000"):
        _write(seg_a / rel)
    SegmentSync(store, tmp_path / "a").publish()
    b = SegmentSync(store, tmp_path / "b")
    b.pull([NAME], partitions=[])  # B pulled the fetchlist, then its fetch of partition 0 died after one commit
    _write(seg_b / "fetcher" / "part-00000-00000.parquet", b"mine")
    _write(seg_b / "content" / "part-00000-00000.parquet", b"mine")
    leases = PartitionLeases(b, NAME, 60.0, structlog.get_logger())
    assert leases.acquire(None) == [1] and leases.done_in_bucket == {0}
    assert b.unpublished_partitions(NAME) == {0}
    publishing = Lease(store, partition_lease_key(store, NAME, 0), 60.0, structlog.get_logger())
    publishing.acquire()  # as if a fetch sharing B's staging copy were publishing partition 0 right now
    assert leases.unheld({0}) == set()
    publishing.release()
    assert leases.unheld({0}) == {0}
    b.pull([NAME], partitions=[1], done_elsewhere={0})
    leases.release()
    assert not (seg_b / "fetcher" / "part-00000-00000.parquet").exists()
    assert not (seg_b / "content" / "part-00000-00000.parquet").exists()
    assert (seg_b / "fetchlist" / "part-00001.parquet").exists()
    assert len(keys(s3, bucket, f"crawl/segments/{NAME}/fetcher/")) == 3  # the bucket's partition 0 is untouched


def test_a_leased_publish_sends_only_its_partitions_and_leaves_success_to_the_bucket(tmp_path, s3, s3_endpoint,
                                                                                     bucket):
    """Publishing partition 1 sends none of a dead fetch's partition 0 and no local _SUCCESS: the bucket is not done."""
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    seg_a, seg_b = tmp_path / "a" / "segments" / NAME, tmp_path / "b" / "segments" / NAME
    for rel in ("fetchlist/part-00000.parquet", "fetchlist/part-00001.parquet", "fetchlist/_SUCCESS"):
        _write(seg_a / rel)
    SegmentSync(store, tmp_path / "a").publish()
    b = SegmentSync(store, tmp_path / "b")
    b.pull([NAME], partitions=[1])
    # A dead fetch here finished partition 0 but never published it; this one fetched partition 1, and its
    # fetcher, seeing both _done markers, marked the outputs complete.
    for rel in ("fetcher/part-00000-00000.parquet", "fetcher/_done-00000", "fetcher/part-00001-00000.parquet",
                "fetcher/_done-00001", "fetcher/_SUCCESS", "content/_SUCCESS"):
        _write(seg_b / rel)
    assert b.publish({NAME: [1]}) == [NAME]
    assert keys(s3, bucket, f"crawl/segments/{NAME}/fetcher/") == [
        f"crawl/segments/{NAME}/fetcher/{n}" for n in ("_done-00001", "part-00001-00000.parquet")]
    assert not (seg_b / "fetcher" / "_SUCCESS").exists() and not (seg_b / "content" / "_SUCCESS").exists()
