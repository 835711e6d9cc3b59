"""What a page's parse rows hold in memory until their part is written, counted against fetcher.commit_bytes.

The text counts by its length: its UTF-8 bytes as a parse process sends it, else its characters (one
byte each for the usual Latin-1 page). A page's outlinks count too: each is a (url, anchor) tuple of two
strings, ~160 bytes of Python objects besides the characters. On the real-page bench the outlinks were the
biggest thing the part writer held: per part of ~1,300 pages, 12-15 MB of links against 5 MB of text and
6 MB of WARC records, none of it counted, so a part held about three times the bound (docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any

_PER_LINK = 160  # two str headers (49 bytes each), the tuple (56) and its list slot (8)


def held_size(parse_text: dict[str, Any] | None, parse_data: dict[str, Any] | None) -> int:
    """Bytes the page's parse_text and parse_data rows hold, as near as counting their strings gives."""
    size = len(parse_text.get("text") or "") if parse_text is not None else 0
    if parse_data is not None:
        links = parse_data.get("outlinks") or ()
        size += sum(len(link[0]) + len(link[1] or "") for link in links) + _PER_LINK * len(links)
    return size
