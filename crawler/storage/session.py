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
holds what is still in play, not the crawl's history; any other command that
ends alone on the staging copy drops the segments it pulled (a fetch, once its
partitions are published). A fetch first leases its partitions in the bucket
(crawler/storage/partition_lease.py) and pulls and publishes only those.

The arguments a command was given are read, never changed: what staging makes
of them (segment paths in the staging copy, the partitions leased) is in
``Session.values``, which the workspace (crawler/storage/workspace.py) hands on.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig, with_overrides
from crawler.crawldir import Remote, parse_remote
from crawler.errors import StorageError
from crawler.log import get_logger
from crawler.storage.access import Access

# Publish order: segments first (the stores name them), the webdb last (it names what was merged).
STORE_PUBLISH_ORDER = ("linkdb", "webdb")


def _names_from_args(session: Session, args: Any) -> list[str]:
    from crawler.storage.segments import segment_names_in

    names: list[str] = []
    for dest in session.access.segment_args:
        names.extend(segment_names_in(getattr(args, dest, None)))
    return list(dict.fromkeys(names))


def _unmerged(session: Session, args: Any) -> list[str]:
    from crawler.webdb.store import VersionedStore

    version = VersionedStore(session.crawl_path / "webdb").current()
    merged = set(version.merged_segments) if version else set()
    unlinked: set[str] = set()
    if "linkdb" in session.access.stores:  # crawl and the daemon also finish what the linkdb has not inverted
        linkdb = VersionedStore(session.crawl_path / "linkdb").current()
        unlinked = merged - set(linkdb.merged_segments if linkdb else [])
    return [n for n in session.segments.remote_names() if n not in merged or n in unlinked]


# Which segments a command pulls (Access.segments): a registry, so a new kind of command adds a line.
SEGMENT_SELECTORS: dict[str, Callable[[Session, Any], list[str]]] = {
    "none": lambda session, args: [],
    "args": _names_from_args,
    "unmerged": _unmerged,
    "all": lambda session, args: session.segments.remote_names(),
    "args_or_all": lambda session, args: _names_from_args(session, args) or session.segments.remote_names(),
}


# How long a command waits for the staging lock: long enough for another command's closing eviction
# (renames and deletes), far too short to wait out a writer, which is refused with a clear error instead.
_LOCK_WAIT = 3.0


def _flock(fd: int, mode: int, wait: float) -> bool:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


@contextmanager
def _staging_lock(crawl_path: Path, exclusive: bool) -> Iterator[None]:
    """Writers have the staging copy to themselves; readers (and segment writers) share it."""
    with _lock_if_free(crawl_path, exclusive, _LOCK_WAIT) as locked:
        if not locked:
            raise StorageError(f"{crawl_path}: staging copy in use by another command on this machine; wait for it, "
                               "or give this one its own storage.staging_dir")
        yield


@contextmanager
def _lock_if_free(crawl_path: Path, exclusive: bool, wait: float = 0.0) -> Iterator[bool]:
    lock = crawl_path / ".storage" / "lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, wait)
    finally:
        os.close(fd)


class Session:
    def __init__(self, cfg: CrawlerConfig, remote: Remote, access: Access, log: Any, *,
                 by_reference: bool = False) -> None:
        from crawler.storage.bucket import Bucket
        from crawler.storage.files import FileSync
        from crawler.storage.lease import Lease
        from crawler.storage.segments import SegmentSync

        self.cfg = cfg
        self.access = access
        self.log = log
        self.crawl_path = cfg.crawl_path
        self.bucket = Bucket(remote, cfg.storage, by_reference=by_reference)
        self.segments = SegmentSync(self.bucket, self.crawl_path)
        self.files = FileSync(self.bucket, self.crawl_path)
        self.leases = {name: Lease(self.bucket, remote.key(name, ".lock"), cfg.storage.lease_ttl, log)
                       for name in access.writes}
        self.partition_leases: Any = None  # PartitionLeases of a fetch, once taken
        self.pulled: list[str] = []
        # The arguments as staged, by destination: segments in the staging copy, the partitions leased.
        self.values: dict[str, Any] = {}

    def store(self, name: str) -> Any:
        from crawler.storage.stores import StoreSync

        return StoreSync(self.bucket, self.crawl_path, name)

    @contextmanager
    def run(self, args: Any) -> Iterator[dict[str, Any]]:
        """Lease, pull, run the command (the ``with`` body), publish; yields the arguments as staged."""
        with ExitStack() as stack:
            for lease in self.leases.values():
                lease.acquire()
                stack.callback(lease.release)
            self._lease_partitions(args, stack)  # before the staging copy is touched: a refused fetch leaves it as is
            self.crawl_path.mkdir(parents=True, exist_ok=True)
            with _staging_lock(self.crawl_path, exclusive=bool(self.access.writes)):
                self.pull(args)
                yield self.values
                self.publish()
                if self.leases:  # only a writer has the staging copy to itself, so only it may empty it
                    self.evict()
            if not self.leases:
                self.drop_pulled()

    def _lease_partitions(self, args: Any, stack: ExitStack) -> None:
        """A fetch leases the partitions it will fetch, and from then on fetches only those (done ones are skipped)."""
        from crawler.storage.partition_lease import PartitionLeases

        names = _names_from_args(self, args)
        if not self.access.partitions or not names or getattr(args, self.access.partitions_on_executors, False):
            return
        leases = PartitionLeases(self.segments, names[0], self.cfg.storage.lease_ttl, self.log)
        leased = leases.acquire(getattr(args, self.access.partitions, None))
        stack.callback(leases.release)
        self.partition_leases = leases
        self.values[self.access.partitions] = leased
        if leases.done:
            self.log.info("storage.partitions_done", segment=names[0], partitions=leases.done)

    def pull(self, args: Any) -> None:
        t0 = time.monotonic()
        versions = {name: self.store(name).pull(writer=name in self.access.writes) for name in self.access.stores}
        names = SEGMENT_SELECTORS[self.access.segments](self, args)
        if self.segments.listed is not None:  # a reader of the listing must not see what the bucket dropped
            self.segments.forget_gone(self.segments.listed)
        if self.partition_leases is not None:
            leases = self.partition_leases
            # Unpublished files here of a partition another machine finished: a fetch that died here left them.
            # Not while a lease is still held on it: a fetch sharing this staging copy may be publishing it.
            leftovers = self.segments.unpublished_partitions(names[0]) & leases.done_in_bucket
            self.segments.pull(names, partitions=sorted(leases.held), done_elsewhere=leases.unheld(leftovers))
        elif self.access.partitions and getattr(args, self.access.partitions_on_executors, False):
            self.segments.pull(names, partitions=())  # each Spark task pulls its own partition
        else:
            self.segments.pull(names)
        self.pulled = names
        for dest in self.access.segment_args:
            self.values[dest] = self._to_staging(getattr(args, dest, None))
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
        if self.partition_leases is not None:
            self.partition_leases.verify()
        only = {self.pulled[0]: sorted(self.partition_leases.held)} if self.partition_leases is not None else None
        segments = self.segments.publish(only) if self.access.writes_segments else []
        if self.partition_leases is not None and not self.partition_leases.held:
            # Nothing was left to fetch, so no local _done led publish to check: the last finisher may have died.
            self.segments.complete_fetch(self.pulled[0])
        versions = {name: self.store(name).publish(self.leases[name].verify)
                    for name in STORE_PUBLISH_ORDER if name in self.leases}
        files = self.files.publish()
        if segments or files or any(versions.values()):  # a reader publishes nothing: no line for it
            self.log.info("storage.published", crawl_dir=self.bucket.remote.url, versions=versions,
                          segments=segments, files=files, seconds=round(time.monotonic() - t0, 3))

    def drop_pulled(self) -> None:
        """A command that leases no store drops the segments it pulled once published, if it is alone in staging.

        So a fetch machine's disk holds what is being fetched, and a reader leaves no copy behind that a later
        command could take for the bucket's; a store it read keeps the versions a writer's staging copy keeps.
        Another command still using the staging copy (a fetch of another partition, a reader) keeps them: of two
        fetches of one segment, the later to end drops it.
        """
        from crawler.storage.stores import KEEP_REMOTE_VERSIONS
        from crawler.webdb.store import VersionedStore

        with _lock_if_free(self.crawl_path, exclusive=True) as alone:
            if not alone:
                return
            removed = self.segments.evict(self.pulled)
            for name in self.access.reads:  # versions a reader pulled before: as many as a writer keeps
                if (self.crawl_path / name).is_dir():
                    VersionedStore(self.crawl_path / name).prune(keep=KEEP_REMOTE_VERSIONS)
        if removed:
            self.log.info("storage.evicted", crawl_dir=self.bucket.remote.url, segments=removed)

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
def crawl_lease(cfg: CrawlerConfig, remote: Remote) -> Iterator[None]:
    """One crawl or daemon staged by step per crawl_dir: it holds no store's lease between steps, and a second
    one would resume (fetch, merge) the segment the first is working on."""
    from crawler.storage.bucket import Bucket
    from crawler.storage.lease import Lease

    lease = Lease(Bucket(remote, cfg.storage), remote.key("crawl.lock"), cfg.storage.lease_ttl,
                  get_logger(component="storage"))
    lease.acquire()
    try:
        yield
    finally:
        lease.release()


def reference_config(cfg: CrawlerConfig) -> CrawlerConfig:
    """``cfg`` with its staging in the reference tree (crawler/storage/references.py), where Spark jobs run."""
    from crawler.storage.references import tree_staging_dir

    return with_overrides(cfg, storage={"staging_dir": tree_staging_dir(cfg.storage.staging_dir)})


@contextmanager
def staged_by_reference(cfg: CrawlerConfig, remote: Remote, access: Access,
                        args: Any) -> Iterator[tuple[CrawlerConfig, dict[str, Any]]]:
    """A Spark job's command: the driver pulls references, the executors read and write the bucket."""
    from crawler.storage.references import mark_reference_tree, scratch_prefix

    run_cfg = reference_config(cfg)
    session = Session(run_cfg, remote, access, get_logger(component="storage"), by_reference=True)
    mark_reference_tree(run_cfg.crawl_path)
    with session.run(args) as values:
        yield run_cfg, values
    # Only once all is published: until then references in the tree may still name scratch objects.
    scratch = scratch_prefix(remote)
    session.bucket.delete(f"{scratch}/{rel}" for rel in session.bucket.list(scratch))


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
