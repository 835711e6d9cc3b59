"""Versioned storage of the crawl database (also used for the link database).

Layout::

    webdb/CURRENT              names the live version ("v000017")
    webdb/v000017/pages/       part files
    webdb/v000017/links/
    webdb/v000017/meta.json    {"version": 17, "merged_segments": [...], "created": ...}
    webdb/.lock                flock held by the one job that writes

A writer builds the next version under a temporary name, renames it into place
and only then replaces CURRENT, so a reader (or a killed writer) never sees a
partial version. The lock is an OS-level ``flock``: it dies with its process,
so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crawler.errors import WebDbError
from crawler.fsutil import TEMP_PREFIX, atomic_write_text, publish, remove_temp_files, remove_tree

VERSION_NAME = re.compile(r"^v(\d{6,})$")


@dataclass(frozen=True, slots=True)
class Version:
    path: Path
    number: int
    meta: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> str:
        """A glob DuckDB reads as one table (``pages``, ``links``...)."""
        return str(self.path / name / "*.parquet")

    def has(self, name: str) -> bool:
        return any((self.path / name).glob("*.parquet"))

    @property
    def merged_segments(self) -> list[str]:
        return list(self.meta.get("merged_segments", []))


@contextmanager
def exclusive_lock(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (writing our pid into it); fail at once if a live process has it.

    The lock dies with its process, so a writer killed with SIGKILL leaves a
    file naming a dead pid but no lock: the next writer simply takes it.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise WebDbError(
                f"{what}: locked by another job (pid {holder}); wait for it to finish or stop it, then run again"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


class VersionedStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def current(self) -> Version | None:
        pointer = self.root / "CURRENT"
        try:
            name = pointer.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        match = VERSION_NAME.match(name)
        path = self.root / name
        if not match or not path.is_dir():
            raise WebDbError(f"{pointer}: names {name!r}, which is not a version folder")
        try:
            meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise WebDbError(f"{path / 'meta.json'}: unreadable ({exc})") from exc
        return Version(path, int(match.group(1)), meta)

    def require_current(self) -> Version:
        version = self.current()
        if version is None:
            raise WebDbError(f"{self.root}: no crawl database yet (run `crawler inject` first)")
        return version

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive writer lock; fails at once if another job holds it."""
        self.root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.root / ".lock", str(self.root)):
            # Whoever held the lock before us is gone: its temp files are garbage.
            remove_temp_files(self.root)
            yield

    @contextmanager
    def new_version(self, meta: dict[str, Any]) -> Iterator[Path]:
        """Yield a temp folder for the next version; on success it becomes live (call under lock())."""
        current = self.current()
        number = (current.number + 1) if current else 1
        name = f"v{number:06d}"
        temp = self.root / f"{TEMP_PREFIX}{name}.{os.getpid()}"
        temp.mkdir(parents=True)
        try:
            yield temp
            record = {"version": number, "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), **meta}
            atomic_write_text(temp / "meta.json", json.dumps(record, indent=1))
            # A writer killed between this rename and CURRENT's leaves a version no CURRENT names;
            # we hold the lock, so it is garbage, and renaming onto it would fail (ENOTEMPTY) forever.
            remove_tree(self.root / name)
            publish(temp, self.root / name)
            atomic_write_text(self.root / "CURRENT", name + "\n")
        except BaseException:
            remove_tree(temp)
            raise

    def prune(self, keep: int = 2) -> None:
        """Delete old versions beyond ``keep`` (never the live one)."""
        current = self.current()
        versions = sorted(p for p in self.root.iterdir() if VERSION_NAME.match(p.name))
        for path in versions[:-keep] if keep else versions:
            if current is None or path != current.path:
                remove_tree(path)
