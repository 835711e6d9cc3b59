"""The seam between a remote crawl_dir and jobs that only know local paths.

``cfg.crawl_path`` of an ``s3://`` crawl_dir is its staging folder, so every job
works on local files as before. Around a command, ``staged`` leases what it
writes, pulls what it reads (the stores' live versions, segments by name),
runs it, and publishes what it wrote: segment parts before their markers,
then the linkdb and the webdb (whose ``merged_segments`` name segments that
must already be there), each version complete before its ``CURRENT`` moves.
``publish_round`` does the same publish between two rounds of ``crawl`` and
daemon cycles, so a crash loses at most the round in progress. A writer ends by
evicting from staging the segments both stores have merged, so the staging copy
holds what is still in play, not the crawl's history.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.errors import StorageError
from crawler.log import get_logger
from crawler.storage.access import Access
from crawler.storage.location import Remote, parse_remote

# Publish order: segments first (the stores name them), the webdb last (it names what was merged).
STORE_PUBLISH_ORDER = ("linkdb", "webdb")


def _names_from_args(session: Session, args: argparse.Namespace) -> list[str]:
    from crawler.storage.segments import segment_names_in

    names: list[str] = []
    for dest in session.access.segment_args:
        names.extend(segment_names_in(getattr(args, dest, None)))
    return list(dict.fromkeys(names))


def _unmerged(session: Session, args: argparse.Namespace) -> list[str]:
    from crawler.webdb.store import VersionedStore

    version = VersionedStore(session.crawl_path / "webdb").current()
    merged = set(version.merged_segments) if version else set()
    unlinked: set[str] = set()
    if "linkdb" in session.access.stores:  # crawl and the daemon also finish what the linkdb has not inverted
        linkdb = VersionedStore(session.crawl_path / "linkdb").current()
        unlinked = merged - set(linkdb.merged_segments if linkdb else [])
    return [n for n in session.segments.remote_names() if n not in merged or n in unlinked]


# Which segments a command pulls (Access.segments): a registry, so a new kind of command adds a line.
SEGMENT_SELECTORS: dict[str, Callable[[Session, argparse.Namespace], list[str]]] = {
    "none": lambda session, args: [],
    "args": _names_from_args,
    "unmerged": _unmerged,
    "all": lambda session, args: session.segments.remote_names(),
    "args_or_all": lambda session, args: _names_from_args(session, args) or session.segments.remote_names(),
}


@contextmanager
def _staging_lock(crawl_path: Path, exclusive: bool) -> Iterator[None]:
    """Writers have the staging copy to themselves; readers (and segment writers) share it."""
    lock = crawl_path / ".storage" / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StorageError(f"{crawl_path}: staging copy in use by another command on this machine; wait for it, "
                               "or give this one its own storage.staging_dir") from None
        yield
    finally:
        os.close(fd)


class Session:
    def __init__(self, cfg: CrawlerConfig, remote: Remote, access: Access, log: Any) -> None:
        from crawler.storage.bucket import Bucket
        from crawler.storage.files import FileSync
        from crawler.storage.lease import Lease
        from crawler.storage.segments import SegmentSync

        self.cfg = cfg
        self.access = access
        self.log = log
        self.crawl_path = cfg.crawl_path
        self.bucket = Bucket(remote, cfg.storage)
        self.segments = SegmentSync(self.bucket, self.crawl_path)
        self.files = FileSync(self.bucket, self.crawl_path)
        self.leases = {name: Lease(self.bucket, remote.key(name, ".lock"), cfg.storage.lease_ttl, log)
                       for name in access.writes}

    def store(self, name: str) -> Any:
        from crawler.storage.stores import StoreSync

        return StoreSync(self.bucket, self.crawl_path, name)

    @contextmanager
    def run(self, args: argparse.Namespace) -> Iterator[None]:
        with ExitStack() as stack:
            for lease in self.leases.values():
                lease.acquire()
                stack.callback(lease.release)
            self.crawl_path.mkdir(parents=True, exist_ok=True)
            stack.enter_context(_staging_lock(self.crawl_path, exclusive=bool(self.access.writes)))
            self.pull(args)
            yield
            self.publish()
            if self.leases:  # only a writer has the staging copy to itself, so only it may empty it
                self.evict()

    def pull(self, args: argparse.Namespace) -> None:
        t0 = time.monotonic()
        versions = {name: self.store(name).pull(writer=name in self.access.writes) for name in self.access.stores}
        names = SEGMENT_SELECTORS[self.access.segments](self, args)
        self.segments.pull(names)
        for dest in self.access.segment_args:
            setattr(args, dest, self._to_staging(getattr(args, dest, None)))
        self.files.pull(self.access.files)
        self.log.info("storage.pulled", crawl_dir=self.bucket.remote.url, versions=versions, segments=names,
                      seconds=round(time.monotonic() - t0, 3))

    def _to_staging(self, value: Any) -> Any:
        from crawler.storage.segments import segment_names_in

        if isinstance(value, list):
            return [self._to_staging(v) for v in value]
        names = segment_names_in(value)
        return str(self.crawl_path / "segments" / names[0]) if names else value

    def publish(self) -> None:
        t0 = time.monotonic()
        segments = self.segments.publish() if self.access.writes_segments else []
        versions = {name: self.store(name).publish(self.leases[name].verify)
                    for name in STORE_PUBLISH_ORDER if name in self.leases}
        files = self.files.publish()
        if segments or files or any(versions.values()):  # a reader publishes nothing: no line for it
            self.log.info("storage.published", crawl_dir=self.bucket.remote.url, versions=versions,
                          segments=segments, files=files, seconds=round(time.monotonic() - t0, 3))

    def evict(self) -> None:
        """Drop from staging the segments both stores have merged: nothing pulls them again unless it names them."""
        from crawler.webdb.store import VersionedStore

        webdb, linkdb = (VersionedStore(self.crawl_path / n).current() for n in ("webdb", "linkdb"))
        if webdb is None or linkdb is None:
            return
        removed = self.segments.evict(sorted(set(webdb.merged_segments) & set(linkdb.merged_segments)))
        if removed:
            self.log.info("storage.evicted", crawl_dir=self.bucket.remote.url, segments=removed)


@contextmanager
def staged(cfg: CrawlerConfig, args: argparse.Namespace, access: Access | None) -> Iterator[None]:
    """Run a command on a remote crawl_dir through its staging copy; nothing at all for a local one."""
    remote = parse_remote(cfg.crawl_dir)
    if remote is None or access is None:
        yield
        return
    with Session(cfg, remote, access, get_logger(component="storage")).run(args):
        yield


def publish_round(cfg: CrawlerConfig) -> None:
    """Publish what a crawl round or daemon cycle wrote (call between rounds); nothing for a local crawl_dir."""
    remote = parse_remote(cfg.crawl_dir)
    if remote is None:
        return
    from crawler.storage.bucket import Bucket
    from crawler.storage.files import FileSync
    from crawler.storage.lease import require_held
    from crawler.storage.segments import SegmentSync
    from crawler.storage.stores import StoreSync

    bucket = Bucket(remote, cfg.storage)
    t0 = time.monotonic()
    segments = SegmentSync(bucket, cfg.crawl_path).publish()
    versions = {}
    for name in STORE_PUBLISH_ORDER:
        key = remote.key(name, ".lock")
        versions[name] = StoreSync(bucket, cfg.crawl_path, name).publish(lambda key=key: require_held(bucket, key))
    files = FileSync(bucket, cfg.crawl_path).publish()
    get_logger(component="storage").info("storage.published", crawl_dir=remote.url, versions=versions,
                                         segments=segments, files=files, seconds=round(time.monotonic() - t0, 3))
