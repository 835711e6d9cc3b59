"""Pull and publish segments between the bucket and the staging copy, markers always last.

A segment's parts are written once (or an output is rewritten wholesale by
``parse`` / ``updatesegs``) and each output says it is complete with a marker
(``_SUCCESS``, the fetcher's ``_done-NNNNN``). Uploading every part before any
marker means a reader listing the bucket never sees a marker whose parts are
missing. A manifest per segment in the staging copy (size and mtime of what was
pulled or published) keeps each publish to the files that changed.

Several machines may fetch one segment's partitions (``fetch --partition I``),
each in its own staging copy, so none of their fetchers sees every
``_done-NNNNN`` and none writes ``_SUCCESS``. After publishing its marker each
one reads the bucket's listing; whichever sees a marker for every fetchlist
partition writes the outputs' ``_SUCCESS`` there. Of two machines finishing
together at least the later one's listing holds both markers (a listing after
a PUT sees it), and both writing ``_SUCCESS`` is harmless (``If-None-Match``).

A fetch under partition leases (``fetch --partition I``, a Spark task) pulls
the whole fetchlist but only the parts and markers of the partitions it leased,
and publishes only those partitions' files. Its outputs' ``_SUCCESS`` is written
by the bucket's completion check alone: one the local fetcher wrote (it saw a
``_done`` here for every partition, maybe one a dead fetch left unpublished)
is dropped, not published. The bucket is the truth for whatever a pull
brought: a file the manifest says came from the bucket, unchanged since, and
no longer there is removed from staging by the next pull.

Deleting a segment from the bucket goes the other way: ``_SUCCESS`` first, then
the other markers, then the parts, so no reader finds a marker whose parts are
going.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from crawler.fsutil import TEMP_PREFIX, remove_tree, temp_path_for
from crawler.segments.layout import (
    DONE_PREFIX,
    FETCH_OUTPUTS,
    MARKER_PREFIX,
    PART_PREFIX,
    SUCCESS,
    fetch_progress,
    file_partition,
)
from crawler.storage.bucket import Bucket
from crawler.storage.stores import STATE_DIR, read_state, write_state

LEASES = ".leases"  # below segments/: the fetch leases of partitions (partition_lease.py); no segment is named so

SEGMENT_NAME = re.compile(r"^\d{8}T\d{9}Z$")
_MARKER = MARKER_PREFIX  # _SUCCESS, _done-NNNNN: the files that vouch for others


def is_segment_name(name: str) -> bool:
    return bool(SEGMENT_NAME.match(name))


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _for_partitions(rel: str, partitions: Collection[int] | None) -> bool:
    """Whether a fetch of ``partitions`` (None: all) pulls ``rel``: the whole fetchlist, its partitions' files."""
    if partitions is None or rel.startswith("fetchlist/"):
        return True
    partition = file_partition(rel)
    return partition is not None and partition in partitions


def _marker_order(rel: str) -> tuple[bool, str]:
    # _SUCCESS after the _done markers it summarises.
    return (rel.rsplit("/", 1)[-1] == SUCCESS, rel)


class SegmentSync:
    def __init__(self, bucket: Bucket, crawl_path: Path) -> None:
        self.bucket = bucket
        self.dir = crawl_path / "segments"
        self.state_dir = crawl_path / STATE_DIR / "segments"
        self.listed: list[str] | None = None  # the bucket's segment names as last listed

    def key(self, *parts: str) -> str:
        return self.bucket.remote.key("segments", *parts)

    def remote_names(self) -> list[str]:
        self.listed = [n for n in self.bucket.children(self.key()) if is_segment_name(n)]
        return self.listed

    def fetch_partitions(self, name: str) -> tuple[list[int], set[int]]:
        """A segment's fetchlist partitions in the bucket, and those with a ``_done`` marker there."""
        # Two narrow listings, not the whole segment's: a lease is taken before every partition's fetch.
        parts, done = f"fetchlist/{PART_PREFIX}", f"fetcher/{DONE_PREFIX}"
        found = [parts + rel for rel in self.bucket.names_starting(self.key(name, parts))]
        found += [done + rel for rel in self.bucket.names_starting(self.key(name, done))]
        return fetch_progress(found)

    def _manifest_path(self, name: str) -> Path:
        return self.state_dir / f"{name}.json"

    def pull(self, names: list[str], partitions: Collection[int] | None = None,
             done_elsewhere: Collection[int] = ()) -> None:
        """Make each named segment's staging copy the bucket's (parts first, then markers), keeping unpublished files.

        With ``partitions``: only the fetchlist and those partitions' parts and markers. Unpublished files of
        ``done_elsewhere`` partitions (left by a fetch that died here, then done by another) are dropped.
        """
        for name in names:
            local = self.dir / name
            self._drop_leftovers(name, done_elsewhere)
            listing = self.bucket.list(self.key(name))
            objects = {rel: size for rel, size in listing.items() if _for_partitions(rel, partitions)}
            manifest = read_state(self._manifest_path(name))
            for rel in [r for r in manifest if r not in listing]:
                if (local / rel).is_file() and manifest[rel] == _stamp(local / rel):
                    (local / rel).unlink()  # gone from the bucket (a rewritten output, a retracted part)
                if not (local / rel).is_file():
                    del manifest[rel]
            wanted = [rel for rel, size in objects.items()
                      if not (local / rel).is_file() or (local / rel).stat().st_size != size]
            parts = [r for r in wanted if not r.rsplit("/", 1)[-1].startswith(_MARKER)]
            markers = sorted((r for r in wanted if r not in parts), key=_marker_order)
            local.mkdir(parents=True, exist_ok=True)
            for batch in (parts, markers):
                self.bucket.download([(self.key(name, rel), local / rel) for rel in batch])
            for rel in objects:
                if (local / rel).is_file():
                    manifest[rel] = _stamp(local / rel)
            write_state(self._manifest_path(name), manifest)

    def _unpublished_files(self, name: str) -> dict[str, int]:
        """Files of a staging segment that belong to one fetch partition and are not as pulled/published: rel -> it."""
        local = self.dir / name
        if not local.is_dir():
            return {}
        manifest = read_state(self._manifest_path(name))
        found = {}
        for rel in (*self._files(local, marker=False), *self._files(local, marker=True)):
            partition = file_partition(rel)
            if partition is not None and manifest.get(rel) != _stamp(local / rel):
                found[rel] = partition
        return found

    def unpublished_partitions(self, name: str) -> set[int]:
        return set(self._unpublished_files(name).values())

    def _drop_leftovers(self, name: str, partitions: Collection[int]) -> None:
        for rel, partition in self._unpublished_files(name).items() if partitions else ():
            if partition in partitions:
                (self.dir / name / rel).unlink(missing_ok=True)

    def publish(self, only: dict[str, Collection[int]] | None = None) -> list[str]:
        """Upload what changed in staging since it was pulled or published; the segments touched.

        ``only`` maps a segment to the partitions whose files may be published (a fetch publishes only what it
        leased: anything else of that segment in staging is another process's, or a dead one's).
        """
        touched = []
        if not self.dir.is_dir():
            return touched
        for local in sorted(p for p in self.dir.iterdir() if p.is_dir() and is_segment_name(p.name)):
            partitions = (only or {}).get(local.name)
            if self._publish_one(local, partitions):
                touched.append(local.name)
            # Also untouched: the machine that published the last marker may have died before it could look.
            self._finish_partitioned_fetch(local)
        return touched

    def _finish_partitioned_fetch(self, local: Path) -> bool:
        """Write the fetch outputs' remote ``_SUCCESS`` once every partition's ``_done`` marker is in the bucket."""
        fetcher = local / "fetcher"
        if (fetcher / SUCCESS).exists() or not any(fetcher.glob(DONE_PREFIX + "*")):
            return False  # a whole fetch marked itself; a fetch that finished no partition has nothing to add
        return self.complete_fetch(local.name)

    def complete_fetch(self, name: str) -> bool:
        """Write the fetch outputs' ``_SUCCESS`` in the bucket if every fetchlist partition is ``_done`` there."""
        remote = self.bucket.list(self.key(name))
        partitions, done = fetch_progress(remote)
        if f"fetcher/{SUCCESS}" in remote or not partitions or not set(partitions) <= done:
            return False
        for output in sorted(FETCH_OUTPUTS, key=lambda o: o == "fetcher"):  # fetcher/_SUCCESS, the one read, last
            self.bucket.put_if_absent(self.key(name, output, SUCCESS), b"")
        return True

    def delete(self, names: list[str]) -> None:
        """Remove segments from the crawl: staging copy, then the bucket's ``_SUCCESS``, other markers, parts."""
        for name in names:
            self._remove_staging(name)  # else the next publish would upload it all again
            objects = sorted(self.bucket.list(self.key(name)))
            base = {rel: rel.rsplit("/", 1)[-1] for rel in objects}
            success = [rel for rel in objects if base[rel] == SUCCESS]
            markers = [rel for rel in objects if base[rel].startswith(_MARKER) and rel not in success]
            parts = [rel for rel in objects if not base[rel].startswith(_MARKER)]
            for batch in (success, markers, parts):
                self.bucket.delete(self.key(name, rel) for rel in batch)
            # Leases of its partitions outlive a fetch that died holding them; with the segment gone, nobody will
            # take them over, so they would stay in the bucket for good.
            leases = self.key(LEASES, name) + "/"
            self.bucket.delete(leases + rel for rel in self.bucket.names_starting(leases))

    def unpublished(self, name: str) -> bool:
        """Whether the staging copy of a segment holds a file not in the bucket as it is (by its manifest)."""
        local = self.dir / name
        manifest = read_state(self._manifest_path(name))
        return any(manifest.get(rel) != _stamp(local / rel)
                   for rel in (*self._files(local, marker=False), *self._files(local, marker=True)))

    def evict(self, names: list[str]) -> list[str]:
        """Remove segments from the staging copy that hold nothing unpublished; those removed."""
        removed = [n for n in names if (self.dir / n).is_dir() and not self.unpublished(n)]
        for name in removed:
            self._remove_staging(name)
        return removed

    def forget_gone(self, remote: list[str]) -> list[str]:
        """Remove staging segments the bucket no longer has (pruned elsewhere) that hold nothing unpublished."""
        if not self.dir.is_dir():
            return []
        gone = sorted(p.name for p in self.dir.iterdir()
                      if p.is_dir() and is_segment_name(p.name) and p.name not in set(remote)
                      and self._manifest_path(p.name).exists())
        return self.evict(gone)

    def _remove_staging(self, name: str) -> None:
        # Renamed out of the way first: a half-removed copy must never be published (it would retract parts).
        if (self.dir / name).exists():
            gone = temp_path_for(self.dir / name)
            (self.dir / name).rename(gone)
            remove_tree(gone)
        self._manifest_path(name).unlink(missing_ok=True)

    def _publish_one(self, local: Path, partitions: Collection[int] | None = None) -> bool:
        name = local.name
        manifest = read_state(self._manifest_path(name))
        # Markers are listed before parts: a marker seen here was written after its parts, so they are seen too.
        if partitions is not None:
            self._unmark_outputs(local, manifest)
        markers = [r for r in self._files(local, marker=True) if _for_partitions(r, partitions)]
        parts = [r for r in self._files(local, marker=False) if _for_partitions(r, partitions)]
        changed_parts = [r for r in parts if manifest.get(r) != _stamp(local / r)]
        changed_markers = sorted((r for r in markers if manifest.get(r) != _stamp(local / r)), key=_marker_order)
        if not changed_parts and not changed_markers:
            return False
        self._retract_rewritten(name, local, changed_markers, set(parts) | set(markers))
        for batch in (changed_parts, changed_markers):
            self.bucket.upload([(local / rel, self.key(name, rel)) for rel in batch])
            for rel in batch:
                manifest[rel] = _stamp(local / rel)
        write_state(self._manifest_path(name), manifest)
        return True

    @staticmethod
    def _unmark_outputs(local: Path, manifest: dict) -> None:
        """Under partition leases only the bucket's completion check writes ``_SUCCESS``: drop one written here.

        The local fetcher writes it when it sees every partition's ``_done`` here, which may include one a dead
        fetch left unpublished; the bucket's markers are the ones that count.
        """
        for output in FETCH_OUTPUTS:
            rel = f"{output}/{SUCCESS}"
            if (local / rel).is_file() and manifest.get(rel) != _stamp(local / rel):
                (local / rel).unlink()

    def _retract_rewritten(self, name: str, local: Path, markers: list[str], present: set[str]) -> None:
        """An output completed again (re-parse, updatesegs) may have dropped parts: unmark it, delete the stale ones."""
        for marker in (m for m in markers if m.rsplit("/", 1)[-1] == SUCCESS and "/" in m):
            output = marker.rsplit("/", 1)[0]
            remote = self.bucket.list(self.key(name, output))
            stale = [f"{output}/{rel}" for rel in remote if f"{output}/{rel}" not in present]
            if stale:
                if SUCCESS in remote:
                    self.bucket.delete([self.key(name, marker)])
                self.bucket.delete(self.key(name, rel) for rel in stale)

    @staticmethod
    def _files(local: Path, *, marker: bool) -> list[str]:
        found = []
        for path in sorted(local.rglob("*")):
            if path.name.startswith(TEMP_PREFIX) or any(p.startswith(TEMP_PREFIX) for p in path.relative_to(local).parts):
                continue
            if path.is_file() and path.name.startswith(_MARKER) == marker:
                found.append(path.relative_to(local).as_posix())
        return found


def segment_names_in(values: object) -> list[str]:
    """Segment names among argument values (paths, names or URLs): the last path component, if it is one."""
    items = values if isinstance(values, list) else [values]
    names = []
    for item in items:
        if isinstance(item, str) and is_segment_name(item.rstrip("/").rsplit("/", 1)[-1]):
            names.append(item.rstrip("/").rsplit("/", 1)[-1])
    return names

