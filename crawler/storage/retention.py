"""``daemon.keep_segments`` on a remote crawl_dir: segments pruned from staging leave the bucket too.

The daemon prunes its staging copy (crawler/daemon/retention.py); this applies
the same rule (merged by the live webdb, beyond the newest N) to the bucket's
listing, which also holds segments this staging copy never pulled (an earlier
run's, another machine's). With ``daemon.archive_dir`` set, the archive gets a
complete copy first (the staging one the daemon moved there, else pulled whole),
so a segment is never deleted before it is archived.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.crawldir import parse_remote
from crawler.errors import StorageError
from crawler.fsutil import publish, remove_tree, temp_path_for


def prune_remote_segments(cfg: CrawlerConfig, merged: list[str], log: Any) -> list[str]:
    """Delete (after archiving, if configured) the bucket's merged segments beyond the newest keep; their names."""
    remote = parse_remote(cfg.crawl_dir)
    keep = cfg.daemon.keep_segments
    if remote is None or keep <= 0:
        return []
    from crawler.storage.bucket import Bucket
    from crawler.storage.segments import SegmentSync

    sync = SegmentSync(Bucket(remote, cfg.storage), cfg.crawl_path)
    done = set(merged)
    pruned: list[str] = []
    try:
        for name in [n for n in sync.remote_names() if n in done][:-keep]:
            if cfg.daemon.archive_dir:
                _archive(sync, name, Path(cfg.daemon.archive_dir))
            sync.delete([name])
            pruned.append(name)
    except StorageError as exc:  # an old segment left in the bucket costs space, not correctness: next cycle retries
        log.warning("storage.prune_failed", crawl_dir=remote.url, error=str(exc))
    if pruned:
        log.info("storage.segments_pruned", crawl_dir=remote.url, segments=pruned,
                 action="archived" if cfg.daemon.archive_dir else "deleted", kept=keep)
    return pruned


def _archive(sync: Any, name: str, archive_dir: Path) -> None:
    target = archive_dir / name
    if target.exists():  # moved there from staging by the local prune
        return
    objects = sync.bucket.list(sync.key(name))
    if not objects:
        return
    archive_dir.mkdir(parents=True, exist_ok=True)
    temp = temp_path_for(target)
    remove_tree(temp)
    try:
        sync.bucket.download([(sync.key(name, rel), temp / rel) for rel in objects])
        publish(temp, target)
    except BaseException:
        remove_tree(temp)
        raise
