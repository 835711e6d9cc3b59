"""Where ``crawl_dir`` lives: a local folder, or an object-store URL worked through a local staging copy.

Below the config (it imports nothing of the crawler's): the config validates
``crawl_dir`` with it and computes ``crawl_path``, and every command does, so it
stays free of heavy imports and ``normalize-check`` pays nothing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# Schemes a remote crawl_dir may use; each needs an object store behind it (crawler.storage.bucket).
REMOTE_SCHEMES = ("s3",)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://(.*)$")


@dataclass(frozen=True, slots=True)
class Remote:
    scheme: str
    bucket: str
    prefix: str  # no leading or trailing slash; "" = the bucket's root

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, *parts: str) -> str:
        """The object key of a path below crawl_dir, e.g. key("webdb", "CURRENT")."""
        return "/".join(p for p in (self.prefix, *parts) if p)


def parse_remote(crawl_dir: str) -> Remote | None:
    """None for a local path; raises ValueError (worded for the config error) for a URL we cannot use."""
    match = _URL.match(crawl_dir)
    if match is None:
        return None
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "file":
        return None
    if scheme not in REMOTE_SCHEMES:
        raise ValueError(f"{scheme}:// is not supported; use a local path or s3://bucket/prefix")
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.match(bucket):
        raise ValueError(f"{bucket!r} is not a valid bucket name (3-63 of a-z 0-9 . -)")
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise ValueError(f"prefix {prefix!r} has an empty, . or .. component")
    return Remote(scheme, bucket, prefix)


def check_crawl_dir(value: str) -> str:
    parse_remote(value)
    return value


def default_staging_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "crawler" / "staging"


def staging_path(remote: Remote, staging_dir: str) -> Path:
    """The local copy of a remote crawl_dir: one folder per bucket and prefix, so two crawls never share one."""
    root = Path(staging_dir) if staging_dir else default_staging_dir()
    return root / remote.scheme / remote.bucket / remote.prefix if remote.prefix else root / remote.scheme / remote.bucket


def local_crawl_path(crawl_dir: str, staging_dir: str) -> Path:
    """The folder the jobs work in: crawl_dir itself, or its staging copy when it is remote."""
    remote = parse_remote(crawl_dir)
    if remote is None:
        return Path(crawl_dir.removeprefix("file://"))
    return staging_path(remote, staging_dir)
