"""``daemon.keep_segments``: delete (or archive) merged segments beyond the newest N.

Only segments the live webdb version has merged are candidates: an unmerged one
still holds fetch results (or a fetchlist) the crawl needs. Archiving moves the
folder with a rename; across file systems it copies under a temporary name first,
so the archive never holds half a segment.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from crawler.fsutil import TEMP_PREFIX, publish, remove_tree
from crawler.segments.layout import Segment, list_segments


def prune_segments(segments_dir: Path, merged: list[str], keep: int, archive_dir: str, log: Any) -> list[str]:
    """Remove merged segments beyond the newest ``keep`` (0 keeps all); returns their names."""
    if keep <= 0:
        return []
    done = set(merged)
    candidates = [s for s in list_segments(segments_dir) if s.name in done]
    old = candidates[:-keep]
    for segment in old:
        if archive_dir:
            archive(segment, Path(archive_dir))
        else:
            remove_tree(segment.path)
    if old:
        log.info("segments.pruned", segments=[s.name for s in old], action="archived" if archive_dir else "deleted",
                 kept=keep)
    return [s.name for s in old]


def archive(segment: Segment, archive_dir: Path) -> None:
    archive_dir.mkdir(parents=True, exist_ok=True)
    target = archive_dir / segment.name
    try:
        os.rename(segment.path, target)
    except OSError:
        temp = archive_dir / f"{TEMP_PREFIX}{segment.name}.{os.getpid()}"
        remove_tree(temp)
        shutil.copytree(segment.path, temp)
        publish(temp, target)
        remove_tree(segment.path)
