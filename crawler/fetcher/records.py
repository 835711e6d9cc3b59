"""Turn one fetch outcome (and its parse) into the rows of the segment outputs."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from crawler.models import FetchStatus
from crawler.parsers.base import ParseResult
from crawler.protocols.base import Response


def utcnow() -> datetime:
    """Naive UTC, the form every timestamp column uses."""
    return datetime.now(UTC).replace(tzinfo=None)


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
    row: dict[str, Any] = {
        "url": entry["url"],
        "host": entry["host"],
        "status": str(status),
        "http_status": None,
        "reason": reason,
        "fetch_time": fetch_time or utcnow(),
        "elapsed_ms": None,
        "content_type": None,
        "content_length": None,
        "truncated": False,
        "digest": None,
        "redirect_url": redirect_url,
        "last_modified": None,
        "etag": None,
    }
    if response is not None:
        row.update(
            http_status=response.status,
            elapsed_ms=int(response.elapsed * 1000),
            content_type=response.header("Content-Type"),
            content_length=len(response.body),
            truncated=response.truncated,
            last_modified=response.header("Last-Modified"),
            etag=response.header("ETag"),
        )
        if status == FetchStatus.SUCCESS and digest:
            row["digest"] = body_digest(response.body)
    return row


def body_digest(body: bytes) -> str:
    return hashlib.md5(body).hexdigest()


def parse_rows(url: str, parse: ParseResult) -> tuple[dict[str, Any], dict[str, Any]]:
    metadata = dict(parse.metadata)
    if parse.noindex:
        metadata["robots_noindex"] = "true"
    if parse.nofollow:
        metadata["robots_nofollow"] = "true"
    if parse.canonical:
        metadata["canonical"] = parse.canonical
    if parse.refresh:
        metadata["refresh"] = parse.refresh
    if parse.reason:
        metadata["parse_reason"] = parse.reason
    data = {
        "url": url,
        "parse_status": parse.status,
        "title": parse.title,
        "outlinks": [{"url": o.url, "anchor": o.anchor} for o in parse.outlinks],
        "metadata": list(metadata.items()),
    }
    return {"url": url, "text": parse.text}, data
