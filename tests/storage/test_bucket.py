"""The bucket layer against moto's S3 server: transfers, listings, conditional PUTs, and errors that name the URL."""

from __future__ import annotations

import pytest

from crawler.config import StorageConfig
from crawler.crawldir import Remote
from crawler.errors import StorageError
from crawler.storage.bucket import Bucket


def _bucket(endpoint: str, name: str) -> Bucket:
    return Bucket(Remote("s3", name, "crawl"), StorageConfig(endpoint=endpoint))


def test_upload_list_download_round_trip(tmp_path, s3_endpoint, bucket):
    """Files uploaded come back byte for byte; listings give sizes and the folders below a prefix."""
    store = _bucket(s3_endpoint, bucket)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "part-00000.parquet").write_bytes(b"x" * 5_000_000)
    (tmp_path / "a" / "_SUCCESS").write_bytes(b"")
    store.upload([(tmp_path / "a" / n, f"crawl/segments/s1/fetcher/{n}") for n in ("part-00000.parquet", "_SUCCESS")])
    assert store.list("crawl/segments/s1") == {"fetcher/part-00000.parquet": 5_000_000, "fetcher/_SUCCESS": 0}
    assert store.children("crawl/segments") == ["s1"]
    store.download([("crawl/segments/s1/fetcher/part-00000.parquet", tmp_path / "b" / "part.parquet")])
    assert (tmp_path / "b" / "part.parquet").read_bytes() == b"x" * 5_000_000
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["part.parquet"]  # no temp file left


def test_conditional_puts(s3_endpoint, bucket):
    """put_if_absent refuses an existing key; put_if_match refuses a stale ETag and accepts the current one."""
    store = _bucket(s3_endpoint, bucket)
    etag = store.put_if_absent("crawl/webdb/CURRENT", b"v000001\n")
    assert etag is not None
    assert store.put_if_absent("crawl/webdb/CURRENT", b"v000002\n") is None
    assert store.put_if_match("crawl/webdb/CURRENT", b"v000002\n", '"stale"') is None
    assert store.put_if_match("crawl/webdb/CURRENT", b"v000002\n", etag) is not None
    assert store.get("crawl/webdb/CURRENT").data == b"v000002\n"
    assert store.get("crawl/webdb/missing") is None


def test_missing_bucket_is_an_error_naming_the_url(s3, s3_endpoint):
    """A bucket that does not exist fails with the s3:// URL and the store's error code."""
    with pytest.raises(StorageError, match=r"s3://no-such-bucket/crawl/webdb/CURRENT: .*NoSuchBucket"):
        _bucket(s3_endpoint, "no-such-bucket").get("crawl/webdb/CURRENT")


def test_unreachable_endpoint_is_an_error_naming_the_url(s3):
    """An endpoint nobody listens on fails (after boto3's retries) with the s3:// URL, not a traceback."""
    with pytest.raises(StorageError, match=r"s3://bkt/crawl/webdb/CURRENT: EndpointConnectionError"):
        _bucket("http://127.0.0.1:9", "bkt").get("crawl/webdb/CURRENT")
