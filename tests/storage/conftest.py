"""moto's S3 server as a real subprocess on loopback, and a fresh bucket per test."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}
_buckets = itertools.count(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint():
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """A boto3 client on the moto server; the AWS env vars it needs are set for the crawler processes too."""
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


@pytest.fixture
def bucket(s3) -> str:
    name = f"crawl-{os.getpid()}-{next(_buckets)}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_args(tmp_path, s3_endpoint, bucket):
    """Config overrides for a fast crawl of loopback servers into s3://BUCKET/crawl, staged under tmp_path."""
    return staging_args(tmp_path / "staging-a", s3_endpoint, bucket)


def staging_args(staging: Path, endpoint: str, bucket: str) -> list[str]:
    """The same remote crawl_dir seen from another machine: its own staging folder."""
    return [
        "-D", f"crawl_dir=s3://{bucket}/crawl",
        "-D", f"storage.endpoint={endpoint}",
        "-D", f"storage.staging_dir={staging}",
        "-D", "http.allow_private_networks=true",
        "-D", "fetcher.min_delay=0",
        "-D", "fetcher.concurrency=16",
        "-D", "fetcher.follow_depth=0",  # one link level a round: these tests step through rounds
        "-D", "log.format=json",
    ]


def keys(s3, bucket: str, prefix: str = "") -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))


def read(s3, bucket: str, key: str) -> str:
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
