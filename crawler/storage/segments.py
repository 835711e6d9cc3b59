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

Deleting a segment from the bucket goes the other way: ``_SUCCESS`` first, then
the other markers, then the parts, so no reader finds a marker whose parts are
going.
"""

from __future__ import annotations

import re
from pathlib import Path

from crawler.fetcher.resume import OUTPUTS as FETCH_OUTPUTS
from crawler.fsutil import TEMP_PREFIX, remove_tree, temp_path_for
from crawler.segments.layout import SUCCESS
from crawler.storage.bucket import Bucket
from crawler.storage.stores import STATE_DIR, read_state, write_state

SEGMENT_NAME = re.compile(r"^\d{8}T\d{9}Z$")
_MARKER = "_"  # _SUCCESS, _done-NNNNN: the files that vouch for others
_FETCHLIST_PART = re.compile(r"^fetchlist/part-(\d+)\.parquet$")
_DONE = re.compile(r"^fetcher/_done-(\d+)$")


def is_segment_name(name: str) -> bool:
    return bool(SEGMENT_NAME.match(name))


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _marker_order(rel: str) -> tuple[bool, str]:
    # _SUCCESS after the _done markers it summarises.
    return (rel.rsplit("/", 1)[-1] == SUCCESS, rel)


class SegmentSync:
    def __init__(self, bucket: Bucket, crawl_path: Path) -> None:
        self.bucket = bucket
        self.dir = crawl_path / "segments"
        self.state_dir = crawl_path / STATE_DIR / "segments"

    def key(self, *parts: str) -> str:
        return self.bucket.remote.key("segments", *parts)

    def remote_names(self) -> list[str]:
        return [n for n in self.bucket.children(self.key()) if is_segment_name(n)]

    def _manifest_path(self, name: str) -> Path:
        return self.state_dir / f"{name}.json"

    def pull(self, names: list[str]) -> None:
        """Bring each named segment's remote files into staging: parts first, then markers."""
        for name in names:
            local = self.dir / name
            objects = self.bucket.list(self.key(name))
            manifest = read_state(self._manifest_path(name))
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

    def publish(self) -> list[str]:
        """Upload what changed in staging since it was pulled or published; the segments touched."""
        touched = []
        if not self.dir.is_dir():
            return touched
        for local in sorted(p for p in self.dir.iterdir() if p.is_dir() and is_segment_name(p.name)):
            if self._publish_one(local):
                touched.append(local.name)
            # Also untouched: the machine that published the last marker may have died before it could look.
            self._finish_partitioned_fetch(local)
        return touched

    def _finish_partitioned_fetch(self, local: Path) -> bool:
        """Write the fetch outputs' remote ``_SUCCESS`` once every partition's ``_done`` marker is in the bucket."""
        fetcher = local / "fetcher"
        if (fetcher / SUCCESS).exists() or not any(fetcher.glob("_done-*")):
            return False  # a whole fetch marked itself; a fetch that finished no partition has nothing to add
        remote = self.bucket.list(self.key(local.name))
        partitions = {m.group(1) for rel in remote if (m := _FETCHLIST_PART.match(rel))}
        done = {m.group(1) for rel in remote if (m := _DONE.match(rel))}
        if f"fetcher/{SUCCESS}" in remote or not partitions or not partitions <= done:
            return False
        for output in sorted(FETCH_OUTPUTS, key=lambda o: o == "fetcher"):  # fetcher/_SUCCESS, the one read, last
            self.bucket.put_if_absent(self.key(local.name, output, SUCCESS), b"")
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

    def _remove_staging(self, name: str) -> None:
        # Renamed out of the way first: a half-removed copy must never be published (it would retract parts).
        if (self.dir / name).exists():
            gone = temp_path_for(self.dir / name)
            (self.dir / name).rename(gone)
            remove_tree(gone)
        self._manifest_path(name).unlink(missing_ok=True)

    def _publish_one(self, local: Path) -> bool:
        name = local.name
        manifest = read_state(self._manifest_path(name))
        # Markers are listed before parts: a marker seen here was written after its parts, so they are seen too.
        markers = self._files(local, marker=True)
        parts = self._files(local, marker=False)
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

