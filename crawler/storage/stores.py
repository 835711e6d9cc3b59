"""Pull and publish a versioned store (``webdb/``, ``linkdb/``) between the bucket and its staging copy.

A version is immutable once ``CURRENT`` names it, so a staging copy whose
``meta.json`` equals the remote one is reused and only new versions travel.
Publishing claims the version name first (``meta.json`` with ``If-None-Match``),
uploads every part, and only then replaces the one ``CURRENT`` object with
``If-Match`` on the ETag pulled: a reader never sees ``CURRENT`` name a partial
version, and a writer whose lease was taken over cannot move ``CURRENT`` from
under the new holder.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crawler.errors import StorageError, WebDbError
from crawler.fsutil import TEMP_PREFIX, atomic_write_text, publish, remove_tree, temp_path_for
from crawler.storage.bucket import Bucket
from crawler.webdb.store import VERSION_NAME, VersionedStore

STATE_DIR = ".storage"  # below the staging crawl_dir: what was pulled, so a publish knows what is new
KEEP_REMOTE_VERSIONS = 2  # the live one and the one before, which a reader may still be pulling


def state_file(crawl_path: Path, name: str) -> Path:
    return crawl_path / STATE_DIR / f"{name}.json"


def read_state(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def write_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(state, sort_keys=True))


class StoreSync:
    def __init__(self, bucket: Bucket, crawl_path: Path, name: str) -> None:
        self.bucket = bucket
        self.name = name
        self.root = crawl_path / name
        self.state_path = state_file(crawl_path, name)

    def key(self, *parts: str) -> str:
        return self.bucket.remote.key(self.name, *parts)

    def _versions(self) -> list[tuple[int, str]]:
        return sorted((int(m.group(1)), n) for n in self.bucket.children(self.key()) if (m := VERSION_NAME.match(n)))

    def pull(self, writer: bool) -> str | None:
        """Make the staging copy's CURRENT the remote one; the version name, or None when there is none yet."""
        blob = self.bucket.get(self.key("CURRENT"))
        name = blob.data.decode(errors="replace").strip() if blob else None
        match = VERSION_NAME.match(name) if name else None
        if blob is not None and match is None:
            raise WebDbError(f"{self.bucket.url(self.key('CURRENT'))}: names {name!r}, which is not a version")
        if writer:
            self._remove_unpublished(int(match.group(1)) if match else 0)
        self.root.mkdir(parents=True, exist_ok=True)
        if name is None:
            (self.root / "CURRENT").unlink(missing_ok=True)
        else:
            self._fetch_version(name)
            atomic_write_text(self.root / "CURRENT", name + "\n")
            if writer:  # readers share the staging copy, so only a writer may delete what one could be reading
                VersionedStore(self.root).prune(keep=KEEP_REMOTE_VERSIONS)
        write_state(self.state_path, {"version": name, "etag": blob.etag if blob else None})
        return name

    def _fetch_version(self, name: str) -> None:
        meta = self.bucket.get(self.key(name, "meta.json"))
        if meta is None:
            raise WebDbError(f"{self.bucket.url(self.key(name))}: CURRENT names it but it has no meta.json")
        local = self.root / name
        try:
            if (local / "meta.json").read_bytes() == meta.data:
                return
        except OSError:
            pass
        objects = self.bucket.list(self.key(name))
        temp = temp_path_for(local)
        remove_tree(temp)
        try:
            self.bucket.download([(self.key(name, rel), temp / rel) for rel in objects if rel != "meta.json"])
            (temp / "meta.json").write_bytes(meta.data)
            remove_tree(local)
            publish(temp, local)
        except BaseException:
            remove_tree(temp)
            raise

    def _remove_unpublished(self, live: int) -> None:
        """Version folders newer than CURRENT were left by a writer that died while publishing (we hold the lease)."""
        for number, name in self._versions():
            if number > live:
                self._delete_version(name)

    def publish(self, verify: Callable[[], None]) -> str | None:
        """Upload the staging copy's live version if it is new, then point CURRENT at it; its name, or None."""
        state = read_state(self.state_path)
        version = VersionedStore(self.root).current()
        if version is None or version.path.name == state.get("version"):
            return None
        verify()
        name = version.path.name
        meta = (version.path / "meta.json").read_bytes()
        if self.bucket.put_if_absent(self.key(name, "meta.json"), meta) is None:
            raise WebDbError(f"{self.bucket.url(self.key(name))}: already exists, so another writer published it "
                             f"since we pulled {state.get('version')}; ours is left unpublished in {version.path}")
        files = [p for p in sorted(version.path.rglob("*"))
                 if p.is_file() and p.name != "meta.json" and not p.name.startswith(TEMP_PREFIX)]
        self.bucket.upload([(p, self.key(name, p.relative_to(version.path).as_posix())) for p in files])
        verify()
        pointer, data = self.key("CURRENT"), (name + "\n").encode()
        etag = (self.bucket.put_if_match(pointer, data, state["etag"]) if state.get("etag")
                else self.bucket.put_if_absent(pointer, data))
        if etag is None:
            raise WebDbError(f"{self.bucket.url(pointer)}: changed since we pulled {state.get('version')}; "
                             f"{name} is uploaded but not live (run the job again on the new version)")
        write_state(self.state_path, {"version": name, "etag": etag})
        self._prune(int(VERSION_NAME.match(name).group(1)))  # type: ignore[union-attr]
        return name

    def _prune(self, live: int) -> None:
        older = [(n, v) for n, v in self._versions() if n < live]
        for _, name in older[:-(KEEP_REMOTE_VERSIONS - 1)] if KEEP_REMOTE_VERSIONS > 1 else older:
            with contextlib.suppress(StorageError):  # an old version left behind costs space, not correctness
                self._delete_version(name)

    def _delete_version(self, name: str) -> None:
        self.bucket.delete(self.key(name, rel) for rel in self.bucket.list(self.key(name)))
