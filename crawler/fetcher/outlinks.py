"""A parsed page's outlinks of its own origin: what in-round following (follow.py) looks at.

Light on imports: the parse processes pick the links out (parsepool.py), and they load no pyarrow.
"""

from __future__ import annotations

from typing import Any


def origin_prefix(url: str) -> str:
    """``scheme://host[:port]/`` of a normalized absolute URL (its outlinks of the same origin start so)."""
    start = url.find("//") + 2
    end = url.find("/", start)
    return url + "/" if end < 0 else url[:end + 1]


def same_origin_links(outlinks: list[dict[str, Any]], url: str, max_outlinks: int) -> list[str]:
    """The outlinks (parse_data's, normalized and absolute) that share ``url``'s origin, in page order,
    among the first ``max_outlinks`` (updatedb keeps no more; 0 = all)."""
    prefix = origin_prefix(url)
    kept = outlinks[:max_outlinks] if max_outlinks else outlinks
    return [link["url"] for link in kept if link["url"].startswith(prefix)]
