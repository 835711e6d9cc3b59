"""crawl_dir as a local path or s3://bucket/prefix: validation and where its staging copy lives."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.config import load_config
from crawler.crawldir import Remote, parse_remote
from crawler.errors import ConfigError


def test_s3_url_parsed_into_bucket_and_prefix():
    """s3://bucket/a/b/ is bucket 'bucket' with prefix 'a/b'; object keys join below it."""
    remote = parse_remote("s3://my-bucket/a/b/")
    assert remote == Remote("s3", "my-bucket", "a/b")
    assert remote.key("webdb", "CURRENT") == "a/b/webdb/CURRENT"
    assert parse_remote("s3://my-bucket").key("webdb") == "webdb"


def test_local_paths_are_not_remote():
    """Plain and file:// paths stay local."""
    assert parse_remote("/var/crawl") is None
    assert parse_remote("relative/dir") is None
    assert parse_remote("file:///var/crawl") is None


@pytest.mark.parametrize(("value", "reason"), [
    ("hdfs://namenode/crawl", "hdfs:// is not supported"),
    ("s3://Bad_Bucket/crawl", "not a valid bucket name"),
    ("s3://bucket/a//b", "empty, . or .. component"),
    ("s3://bucket/a/../b", "empty, . or .. component"),
])
def test_unusable_crawl_dir_is_a_config_error_naming_the_key(value, reason):
    """An unsupported scheme or a bad bucket stops the command with an error naming crawl_dir and the reason."""
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"crawl_dir={value}"])
    message = str(info.value)
    assert "crawl_dir" in message and reason in message


def test_remote_crawl_dir_works_in_its_staging_copy(tmp_path):
    """The jobs' crawl_path for s3://bucket/prefix is a folder per bucket and prefix below storage.staging_dir."""
    cfg = load_config(None, ["crawl_dir=s3://bucket/team/crawl", f"storage.staging_dir={tmp_path}"])
    assert cfg.crawl_path == tmp_path / "s3" / "bucket" / "team" / "crawl"
    assert load_config(None, ["crawl_dir=/data/crawl"]).crawl_path == Path("/data/crawl")
