"""A parse as the rows of a segment's parse_text and parse_data outputs (for a fetch and for a re-parse)."""

from __future__ import annotations

from typing import Any

from crawler.parsers.base import ParseResult


def parse_rows(url: str, parse: ParseResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """The parse_text and parse_data rows of ``url``'s ``parse``, as Arrow's ``Table.from_pylist`` takes them.

    Each outlink is a (url, anchor) tuple, which Arrow reads as the OUTLINK struct: a page's outlinks are
    held from its parse until its part is written (in a parse pool, pickled to the writer process), and a
    tuple is a third of a two-key dict's size, pickled and unpickled in a fifth of the time (50 links:
    12 vs 19 kB resident, 9 vs 49 us; docs/benchmarks.md, "Parse processes give back big pages' heap;
    outlinks as tuples").
    """
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
        "outlinks": [(o.url, o.anchor) for o in parse.outlinks],
        "metadata": list(metadata.items()),
    }
    return {"url": url, "text": parse.text}, data
