"""Segment publish and pull through moto: only changed files travel, and a rewritten output drops its stale parts."""

from __future__ import annotations

import os

from crawler.config import StorageConfig
from crawler.storage.bucket import Bucket
from crawler.storage.location import Remote
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
