"""A parsed page's outlinks of its own origin: what in-round following (follow.py) looks at.

Light on imports: the parse processes pick the links out (parsepool.py), and they load no pyarrow.
"""

from __future__ import annotations


def origin_prefix(url: str) -> str:
    """``scheme://host[:port]/`` of a normalized absolute URL (its outlinks of the same origin start so)."""
    start = url.find("//") + 2
    end = url.find("/", start)
    return url + "/" if end < 0 else url[:end + 1]


def same_origin_links(outlinks: list[tuple[str, str]], url: str, max_outlinks: int) -> list[str]:
    """The outlinks (parse_data's (url, anchor) pairs, normalized and absolute) that share ``url``'s origin,
    in page order, among the first ``max_outlinks`` (updatedb keeps no more; 0 = all)."""
    prefix = origin_prefix(url)
    kept = outlinks[:max_outlinks] if max_outlinks else outlinks
    return [target for target, _ in kept if target.startswith(prefix)]
