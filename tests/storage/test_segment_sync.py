"""Segment publish, pull, eviction and remote pruning through moto: only what changed travels, markers go first."""

from __future__ import annotations

import os

import structlog

from crawler.config import StorageConfig, load_config
from crawler.crawldir import Remote
from crawler.storage.bucket import Bucket
from crawler.storage.retention import prune_remote_segments
from crawler.storage.segments import SegmentSync
from tests.storage.conftest import keys

NAME = "20261130T010203004Z"


def _write(path, data: bytes = b"data") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_publish_uploads_changes_only_and_retracts_rewritten_output(tmp_path, s3, s3_endpoint, bucket):
    """A second publish sends nothing; an output completed again with fewer parts loses the stale one remotely."""
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    sync = SegmentSync(store, tmp_path / "a")
    seg = tmp_path / "a" / "segments" / NAME
    for name in ("part-00000.parquet", "part-00001.parquet", "_SUCCESS"):
        _write(seg / "parse_text" / name)
    _write(seg / "parse_text" / ".tmp-part-00002.parquet.1")  # a writer's temp file is never published
    assert sync.publish() == [NAME]
    assert keys(s3, bucket, f"crawl/segments/{NAME}/") == [
        f"crawl/segments/{NAME}/parse_text/{n}" for n in ("_SUCCESS", "part-00000.parquet", "part-00001.parquet")]
    assert sync.publish() == []
    # `crawler parse` swaps in a new parse_text/ with one part.
    (seg / "parse_text" / "part-00001.parquet").unlink()
    _write(seg / "parse_text" / "part-00000.parquet", b"new")
    os.utime(seg / "parse_text" / "_SUCCESS", ns=(1, 1))
    assert sync.publish() == [NAME]
    assert keys(s3, bucket, f"crawl/segments/{NAME}/") == [
        f"crawl/segments/{NAME}/parse_text/{n}" for n in ("_SUCCESS", "part-00000.parquet")]
    # Another staging copy pulls exactly that.
    other = SegmentSync(store, tmp_path / "b")
    other.pull([NAME])
    pulled = tmp_path / "b" / "segments" / NAME / "parse_text"
    assert sorted(p.name for p in pulled.iterdir()) == ["_SUCCESS", "part-00000.parquet"]
    assert (pulled / "part-00000.parquet").read_bytes() == b"new"
    assert other.publish() == []  # what was pulled is not sent back


def _publish_segments(store: Bucket, staging, names: list[str]) -> SegmentSync:
    sync = SegmentSync(store, staging)
    for name in names:
        for rel in ("fetchlist/part-00000.parquet", "fetchlist/_SUCCESS", "fetcher/part-00000-00000.parquet",
                    "fetcher/_done-00000", "fetcher/_SUCCESS"):
            _write(staging / "segments" / name / rel)
    assert sync.publish() == names
    return sync


def test_evict_keeps_a_staging_segment_with_unpublished_files(tmp_path, s3, s3_endpoint, bucket):
    """Eviction drops published segments from staging only; one holding a file not yet in the bucket stays."""
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    old, new = "20261130T010203004Z", "20261130T020203004Z"
    sync = _publish_segments(store, tmp_path / "a", [old, new])
    _write(tmp_path / "a" / "segments" / new / "content" / "part-00000-00000.parquet")  # written, not published
    assert sync.evict([old, new]) == [old]
    assert sorted(p.name for p in (tmp_path / "a" / "segments").iterdir()) == [new]
    assert len(keys(s3, bucket, f"crawl/segments/{old}/")) == 5  # the bucket keeps it


def test_remote_prune_archives_then_deletes_from_bucket_and_staging(tmp_path, s3, s3_endpoint, bucket):
    """keep_segments on s3://: merged segments beyond the newest N are archived whole, then leave bucket and staging."""
    names = ["20261130T010203004Z", "20261130T020203004Z", "20261130T030203004Z", "20261130T040203004Z"]
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    _publish_segments(store, tmp_path / "a", names)
    # Another machine's daemon, whose staging copy holds only the oldest; the newest is not merged yet.
    staging = tmp_path / "b" / "s3" / bucket / "crawl"
    SegmentSync(store, staging).pull(names[:1])
    assert (staging / "segments" / names[0] / "fetcher" / "_SUCCESS").exists()
    cfg = load_config(None, [f"crawl_dir=s3://{bucket}/crawl", f"storage.endpoint={s3_endpoint}",
                             f"storage.staging_dir={tmp_path / 'b'}", "daemon.keep_segments=2",
                             f"daemon.archive_dir={tmp_path / 'archive'}"])
    # A lease left by a fetch that died holding it, on the pruned segment and on a kept one.
    for name in (names[0], names[3]):
        s3.put_object(Bucket=bucket, Key=f"crawl/segments/.leases/{name}/partition-00000", Body=b"{}")
    assert prune_remote_segments(cfg, names[:3], structlog.get_logger()) == names[:1]
    assert {k.split("/")[2] for k in keys(s3, bucket, "crawl/segments/")} == {*names[1:], ".leases"}
    assert keys(s3, bucket, "crawl/segments/.leases/") == [f"crawl/segments/.leases/{names[3]}/partition-00000"]
    assert not (staging / "segments" / names[0]).exists()  # a later publish must not upload it again
    archived = tmp_path / "archive" / names[0]
    assert sorted(p.relative_to(archived).as_posix() for p in archived.rglob("*") if p.is_file()) == [
        "fetcher/_SUCCESS", "fetcher/_done-00000", "fetcher/part-00000-00000.parquet",
        "fetchlist/_SUCCESS", "fetchlist/part-00000.parquet"]


def test_partition_markers_from_two_staging_copies_complete_the_segment(tmp_path, s3, s3_endpoint, bucket):
    """The fetch outputs get _SUCCESS in the bucket once both copies' _done markers are there, not before."""
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    success = [f"crawl/segments/{NAME}/{o}/_SUCCESS" for o in ("content", "fetcher", "parse_data", "parse_text")]
    for machine, partition in (("a", 0), ("b", 1)):
        seg = tmp_path / machine / "segments" / NAME
        for rel in ("fetchlist/part-00000.parquet", "fetchlist/part-00001.parquet", "fetchlist/_SUCCESS",
                    f"fetcher/part-{partition:05d}-00000.parquet", f"fetcher/_done-{partition:05d}"):
            _write(seg / rel)
        assert SegmentSync(store, tmp_path / machine).publish() == [NAME]
        assert [k for k in keys(s3, bucket, "crawl/") if k.endswith("/_SUCCESS") and "fetchlist" not in k] == (
            success if partition else [])
    assert not (tmp_path / "b" / "segments" / NAME / "fetcher" / "_SUCCESS").exists()  # only the bucket is marked
