"""Which segments a crawl_dir holds, and which of them the live webdb has not merged yet.

crawl and the daemon resume those first; the daemon and the commands both ask here.
"""

from __future__ import annotations

from pathlib import Path

from crawler.config import CrawlerConfig
from crawler.segments.layout import Segment, list_segments
from crawler.webdb.store import VersionedStore


def segments_dir(cfg: CrawlerConfig) -> Path:
    return cfg.crawl_path / "segments"


def unfinished_segments(cfg: CrawlerConfig) -> list[Segment]:
    """Segments generated but not yet merged into the live webdb, oldest first."""
    version = VersionedStore(cfg.crawl_path / "webdb").current()
    merged = set(version.merged_segments) if version else set()
    return [s for s in list_segments(segments_dir(cfg)) if s.is_done("fetchlist") and s.name not in merged]
