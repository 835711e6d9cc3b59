"""The rows a fetch writes for one outcome: its fetcher row, and robots.txt sitemaps as a parse_data row's outlinks.

A parse's own rows come from ``crawler.parsers.rows`` (a re-parse builds them too, without the fetcher).
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timedelta
from typing import Any

from crawler.protocols.base import Response
from crawler.statuses import ROBOTS_SITEMAPS, FetchStatus

_EPOCH = datetime(1970, 1, 1)


def utcnow() -> datetime:
    """Naive UTC, the form every timestamp column uses."""
    # What datetime.now(UTC).replace(tzinfo=None) gives, in ~0.65 instead of ~1.05 us: one per fetcher row.
    return _EPOCH + timedelta(microseconds=time.time_ns() // 1000)


# The response headers a fetcher row keeps, by lower-case name: one pass over the headers instead of
# a ``Response.header`` scan, lower-casing every header, for each of the three.
_KEPT_HEADERS = {"content-type": "content_type", "last-modified": "last_modified", "etag": "etag"}


def fetch_row(
    entry: dict[str, Any],
    status: FetchStatus,
    *,
    reason: str = "",
    response: Response | None = None,
    redirect_url: str | None = None,
    fetch_time: datetime | None = None,
    digest: bool = True,
) -> dict[str, Any]:
    """``digest=False``: the caller fills ``digest`` (a parse process computes it, off the fetch process)."""
    # One dict literal per row (this runs for every request): no row.update(), no default values overwritten.
    if response is None:
        return {"url": entry["url"], "host": entry["host"], "status": str(status), "http_status": None,
                "reason": reason, "fetch_time": fetch_time or utcnow(), "elapsed_ms": None, "content_type": None,
                "content_length": None, "truncated": False, "digest": None, "redirect_url": redirect_url,
                "last_modified": None, "etag": None}
    kept: dict[str, str] = {}
    for key, value in response.headers:
        name = _KEPT_HEADERS.get(key.lower())
        if name is not None and name not in kept:  # the first of a repeated header, as Response.header
            kept[name] = value
    return {"url": entry["url"], "host": entry["host"], "status": str(status), "http_status": response.status,
            "reason": reason, "fetch_time": fetch_time or utcnow(), "elapsed_ms": int(response.elapsed * 1000),
            "content_type": kept.get("content_type"), "content_length": len(response.body),
            "truncated": response.truncated,
            "digest": body_digest(response.body) if digest and status == FetchStatus.SUCCESS else None,
            "redirect_url": redirect_url, "last_modified": kept.get("last_modified"), "etag": kept.get("etag")}


def body_digest(body: bytes) -> str:
    return hashlib.md5(body).hexdigest()


def add_robots_sitemaps(parse_data: dict[str, Any], sitemaps: list[str]) -> None:
    """Append a host's robots.txt Sitemap: URLs to a parse_data row as outlinks (anchor "sitemap"), marked as such."""
    parse_data["outlinks"] += [(u, "sitemap") for u in sitemaps]
    parse_data["metadata"].append((ROBOTS_SITEMAPS, str(len(sitemaps))))
