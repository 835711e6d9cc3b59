"""Pull and publish segments between the bucket and the staging copy, markers always last.

A segment's parts are written once (or an output is rewritten wholesale by
``parse`` / ``updatesegs``) and each output says it is complete with a marker
(``_SUCCESS``, the fetcher's ``_done-NNNNN``). Uploading every part before any
marker means a reader listing the bucket never sees a marker whose parts are
missing. A manifest per segment in the staging copy (size and mtime of what was
pulled or published) keeps each publish to the files that changed.
"""

from __future__ import annotations

import re
from pathlib import Path

from crawler.fsutil import TEMP_PREFIX
from crawler.segments.layout import SUCCESS
from crawler.storage.bucket import Bucket
from crawler.storage.stores import STATE_DIR, read_state, write_state

SEGMENT_NAME = re.compile(r"^\d{8}T\d{9}Z$")
_MARKER = "_"  # _SUCCESS, _done-NNNNN: the files that vouch for others


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
        return touched

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

