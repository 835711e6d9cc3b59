"""Resume a cut-off fetch: what a partition already committed, and the leftovers to clear.

A part of ``fetcher/`` is the commit record of one batch: the writer renames it
into place last, after the batch's content, parse_text and parse_data parts. So
the URLs in a partition's fetcher parts are exactly what is safely stored; any
other output's part without a fetcher part of the same number (the process died
between the renames) and any temporary file are leftovers, removed before the
fetch goes on. Redirect hops are committed rows like any other, so a URL reached
by a redirect before the cut is skipped too.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from crawler.errors import SegmentError
from crawler.fsutil import TEMP_PREFIX, remove_tree
from crawler.segments.layout import FETCH_OUTPUTS, Segment, commit_number, partition_prefix


def committed_urls(segment: Segment, partition: int) -> set[str]:
    urls: set[str] = set()
    prefix = partition_prefix(partition)
    for path in segment.parts("fetcher"):
        if not path.name.startswith(prefix):
            continue
        try:
            column = pq.read_table(path, columns=["url"]).column("url")
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds; the message names the file
            raise SegmentError(f"{path}: unreadable fetcher part ({exc.__class__.__name__}: {exc})") from exc
        urls.update(u for u in column.to_pylist() if u is not None)
    return urls


def clear_leftovers(segment: Segment, partition: int) -> list[str]:
    """Remove temporary files and parts that no fetcher part commits; return their names."""
    prefix = partition_prefix(partition)
    fetcher_dir = segment.dir("fetcher")
    fetcher_parts = fetcher_dir.glob(prefix + "*.parquet") if fetcher_dir.is_dir() else ()
    committed = {commit_number(p.name) for p in fetcher_parts} - {None}
    removed = []
    for output in FETCH_OUTPUTS:
        folder = segment.dir(output)
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            orphan = output != "fetcher" and path.name.startswith(prefix) and commit_number(path.name) not in committed
            # Only this partition's temporaries: another fetch process may be writing its own.
            if path.name.startswith(TEMP_PREFIX + prefix) or orphan:
                remove_tree(path)
                removed.append(f"{output}/{path.name}")
    return removed
