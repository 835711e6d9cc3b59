"""A parse as the rows of a segment's parse_text and parse_data outputs (for a fetch and for a re-parse)."""

from __future__ import annotations

from typing import Any

from crawler.parsers.base import ParseResult


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
