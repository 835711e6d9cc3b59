"""One remote crawl_dir's bucket: bulk transfers through ``pyarrow.fs``, conditional PUTs through boto3.

pyarrow's S3 filesystem moves the Parquet parts (parallel, streamed); it cannot
send ``If-None-Match`` / ``If-Match``, which the lease and the CURRENT pointer
need, so those few small objects go through boto3. Both read credentials from
the standard AWS environment variables (or instance profile); the endpoint and
region come from the ``storage`` config section, else from the AWS env vars.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crawler.config import StorageConfig
from crawler.crawldir import Remote
from crawler.errors import StorageError
from crawler.fsutil import atomic_output
from crawler.storage.references import is_part, read_reference, write_reference

if TYPE_CHECKING:
    from crawler.storage.credentials import Credentials

_TRANSFER_THREADS = 8
_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Blob:
    data: bytes
    etag: str


def _endpoint(cfg: StorageConfig) -> str:
    return cfg.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""


def region(cfg: StorageConfig) -> str:
    return cfg.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def filesystem_options(cfg: StorageConfig, credentials: Credentials | None = None) -> dict[str, object]:
    """``pyarrow.fs.S3FileSystem`` arguments for ``storage``; given credentials win over this machine's chain."""
    endpoint, region_name = _endpoint(cfg), region(cfg)
    options: dict[str, object] = {"region": region_name, "connect_timeout": 10, "request_timeout": 60}
    if credentials:
        options.update(access_key=credentials.access_key, secret_key=credentials.secret_key)
        if credentials.token:
            options["session_token"] = credentials.token
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options.update(endpoint_override=parts.netloc, scheme=parts.scheme)
    return options


class Bucket:
    def __init__(self, remote: Remote, cfg: StorageConfig, *, by_reference: bool = False,
                 credentials: Credentials | None = None) -> None:
        import boto3
        from botocore.config import Config
        from pyarrow import fs

        self.remote = remote
        # Pull Parquet parts as references (crawler/storage/references.py): Spark executors read them in place.
        self.by_reference = by_reference
        endpoint = _endpoint(cfg)
        # Given credentials (a Spark task's, from the driver) win over this machine's chain.
        keys = {"aws_access_key_id": credentials.access_key, "aws_secret_access_key": credentials.secret_key,
                "aws_session_token": credentials.token or None} if credentials else {}
        self._s3 = boto3.client(
            "s3", endpoint_url=endpoint or None, region_name=region(cfg), **keys,
            config=Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10, read_timeout=60),
        )
        self._fs = fs.S3FileSystem(**filesystem_options(cfg, credentials))
        self._fs_errors = (OSError,)

    def url(self, key: str) -> str:
        return f"{self.remote.scheme}://{self.remote.bucket}/{key}"

    def _fail(self, key: str, exc: Exception) -> StorageError:
        return StorageError(f"{self.url(key)}: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    # Small objects with ETags and preconditions (boto3).

    def _code(self, exc: Exception) -> str:
        response = getattr(exc, "response", None) or {}
        return str(response.get("Error", {}).get("Code", ""))

    def get(self, key: str) -> Blob | None:
        try:
            reply = self._s3.get_object(Bucket=self.remote.bucket, Key=key)
            return Blob(reply["Body"].read(), reply["ETag"])
        except Exception as exc:  # noqa: BLE001 - botocore raises ClientError subclasses made at run time
            if self._code(exc) in ("NoSuchKey", "404"):
                return None
            raise self._fail(key, exc) from exc

    def head_etag(self, key: str) -> str | None:
        try:
            return str(self._s3.head_object(Bucket=self.remote.bucket, Key=key)["ETag"])
        except Exception as exc:  # noqa: BLE001
            if self._code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._fail(key, exc) from exc

    def put_if_absent(self, key: str, data: bytes) -> str | None:
        """Create ``key`` only if no object has that name; its ETag, or None when one already does."""
        return self._put(key, data, IfNoneMatch="*")

    def put_if_match(self, key: str, data: bytes, etag: str) -> str | None:
        """Replace ``key`` only if it is still the object with ``etag``; the new ETag, or None when it changed."""
        return self._put(key, data, IfMatch=etag)

    def _put(self, key: str, data: bytes, **condition: str) -> str | None:
        try:
            return str(self._s3.put_object(Bucket=self.remote.bucket, Key=key, Body=data, **condition)["ETag"])
        except Exception as exc:  # noqa: BLE001
            # 409 ConditionalRequestConflict: a concurrent conditional write won; the same answer for us.
            if self._code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "NoSuchKey"):
                return None
            raise self._fail(key, exc) from exc

    def delete_if_match(self, key: str, etag: str) -> bool:
        try:
            self._s3.delete_object(Bucket=self.remote.bucket, Key=key, IfMatch=etag)
            return True
        except Exception as exc:  # noqa: BLE001
            if self._code(exc) in ("PreconditionFailed", "412", "NoSuchKey", "404"):
                return False
            raise self._fail(key, exc) from exc

    def delete(self, keys: Iterable[str]) -> None:
        batch = [{"Key": k} for k in keys]
        for start in range(0, len(batch), 1000):
            try:
                self._s3.delete_objects(Bucket=self.remote.bucket, Delete={"Objects": batch[start:start + 1000]})
            except Exception as exc:  # noqa: BLE001
                raise self._fail(batch[start]["Key"], exc) from exc

    def names_starting(self, prefix: str) -> list[str]:
        """Keys that start with ``prefix`` (any string, not only a folder), relative to it: one narrow listing."""
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.remote.bucket, Prefix=prefix)
            return sorted(o["Key"][len(prefix):] for page in pages for o in page.get("Contents", []))
        except Exception as exc:  # noqa: BLE001
            raise self._fail(prefix, exc) from exc

    # Listing and bulk transfers (pyarrow.fs).

    def list(self, prefix: str) -> dict[str, int]:
        """Every object below ``prefix/``: path relative to it -> size."""
        from pyarrow import fs

        base = f"{self.remote.bucket}/{prefix}".rstrip("/")
        try:
            infos = self._fs.get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True))
        except OSError as exc:
            raise self._fail(prefix, exc) from exc
        return {i.path[len(base) + 1:]: i.size for i in infos if i.type == fs.FileType.File}

    def children(self, prefix: str) -> list[str]:
        """Names of the "folders" directly below ``prefix/``."""
        from pyarrow import fs

        base = f"{self.remote.bucket}/{prefix}".rstrip("/")
        try:
            infos = self._fs.get_file_info(fs.FileSelector(base, recursive=False, allow_not_found=True))
        except OSError as exc:
            raise self._fail(prefix, exc) from exc
        return sorted(i.base_name for i in infos if i.type == fs.FileType.Directory)

    def download(self, pairs: list[tuple[str, Path]]) -> None:
        """Copy objects to local files, each written under a temp name and renamed when complete."""
        self._parallel(self._download_one, pairs)

    def upload(self, pairs: list[tuple[Path, str]]) -> None:
        """Copy local files to objects; each object appears only once completely written (S3 semantics)."""
        self._parallel(self._upload_one, pairs)

    def _parallel(self, func, pairs) -> None:  # type: ignore[no-untyped-def]
        if not pairs:
            return
        with ThreadPoolExecutor(min(_TRANSFER_THREADS, len(pairs))) as pool:
            for future in [pool.submit(func, *pair) for pair in pairs]:
                future.result()

    def _download_one(self, key: str, path: Path) -> None:
        if self.by_reference and is_part(key):
            write_reference(path, key)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._fs.open_input_stream(f"{self.remote.bucket}/{key}") as src, atomic_output(path) as temp, \
                    open(temp, "wb") as dst:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
        except OSError as exc:
            raise self._fail(key, exc) from exc

    def _upload_one(self, path: Path, key: str) -> None:
        source = read_reference(path)
        if source is not None:  # the data is in the bucket already: place it without passing through here
            if source != key:
                self.copy(source, key)
                write_reference(path, key)  # the source may be scratch, deleted once all is published
            return
        try:
            with open(path, "rb") as src, self._fs.open_output_stream(f"{self.remote.bucket}/{key}") as dst:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
        except OSError as exc:
            raise self._fail(key, exc) from exc

    def copy(self, source: str, key: str) -> None:
        """Copy an object inside the bucket (server-side: no data travels through this machine)."""
        try:
            self._fs.copy_file(f"{self.remote.bucket}/{source}", f"{self.remote.bucket}/{key}")
        except OSError as exc:
            raise self._fail(source, exc) from exc
