"""The reference tree: Parquet parts pulled as references, published by server-side copy."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crawler.config import StorageConfig
from crawler.crawldir import Remote
from crawler.errors import StorageError
from crawler.storage.bucket import Bucket
from crawler.storage.bucket_io import BucketIO, bucket_access
from crawler.storage.references import read_reference, write_reference

from .conftest import keys, read


def test_pull_by_reference_downloads_metadata_but_not_parts(tmp_path, s3, bucket, s3_endpoint):
    """A by-reference pull writes a reference for each Parquet part and the real bytes of everything else."""
    s3.put_object(Bucket=bucket, Key="crawl/webdb/v000001/pages/part-00000.parquet", Body=b"PAR1 data PAR1")
    s3.put_object(Bucket=bucket, Key="crawl/webdb/v000001/meta.json", Body=b'{"version": 1}')
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint), by_reference=True)
    part, meta = tmp_path / "pages" / "part-00000.parquet", tmp_path / "meta.json"
    store.download([("crawl/webdb/v000001/pages/part-00000.parquet", part), ("crawl/webdb/v000001/meta.json", meta)])
    assert read_reference(part) == "crawl/webdb/v000001/pages/part-00000.parquet"
    assert meta.read_bytes() == b'{"version": 1}' and read_reference(meta) is None


def test_publishing_a_reference_copies_the_object_inside_the_bucket(tmp_path, s3, bucket, s3_endpoint):
    """Uploading a reference places a copy of the object it names, and the reference then names the copy."""
    s3.put_object(Bucket=bucket, Key="crawl/.tmp-spark/h-1/00000-part/part-00003.parquet", Body=b"the rows")
    store = Bucket(Remote("s3", bucket, "crawl"), StorageConfig(endpoint=s3_endpoint))
    local = tmp_path / "part-00000.parquet"
    write_reference(local, "crawl/.tmp-spark/h-1/00000-part/part-00003.parquet")
    store.upload([(local, "crawl/webdb/v000002/pages/part-00000.parquet")])
    assert read(s3, bucket, "crawl/webdb/v000002/pages/part-00000.parquet") == "the rows"
    assert read_reference(local) == "crawl/webdb/v000002/pages/part-00000.parquet"
    store.upload([(local, "crawl/webdb/v000002/pages/part-00000.parquet")])  # already in place: nothing to do
    assert len(keys(s3, bucket, "crawl/webdb/")) == 1


def test_executors_read_with_the_drivers_endpoint_and_credentials(tmp_path, s3, bucket, s3_endpoint):
    """The access handed to executors opens the bucket by itself, and a part's footer is read through it."""
    remote = Remote("s3", bucket, "crawl")
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"url": ["http://a/", "http://b/"]}), sink)
    s3.put_object(Bucket=bucket, Key="crawl/linkdb/v000001/inlinks/part-00000.parquet", Body=sink.getvalue().to_pybytes())
    access = bucket_access(remote, StorageConfig(endpoint=s3_endpoint))
    assert access.options["access_key"] == "test" and access.options["endpoint_override"].startswith("127.0.0.1:")
    reference = tmp_path / "part-00000.parquet"
    write_reference(reference, "crawl/linkdb/v000001/inlinks/part-00000.parquet")
    assert BucketIO(remote, access).count_rows([reference]) == 2


def test_a_real_file_in_the_reference_tree_is_a_clear_error(tmp_path, s3, bucket, s3_endpoint):
    """A file that is not a reference where the executors expect one fails naming the file and the crawl_dir."""
    remote = Remote("s3", bucket, "crawl")
    stray = tmp_path / "part-00000.parquet"
    pq.write_table(pa.table({"url": ["http://a/"]}), stray)
    with pytest.raises(StorageError, match=rf"{stray}: not a reference to a part in s3://{bucket}/crawl"):
        BucketIO(remote, bucket_access(remote, StorageConfig(endpoint=s3_endpoint))).count_rows([stray])
