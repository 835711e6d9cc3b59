"""Write files so that no reader ever sees a partial one: temp name, fsync, rename."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMP_PREFIX = ".tmp-"


def temp_path_for(path: Path) -> Path:
    """A hidden sibling name that globs like ``*.parquet`` never match."""
    return path.parent / f"{TEMP_PREFIX}{path.name}.{os.getpid()}"


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(temp: Path, final: Path) -> None:
    """Rename a completed temp file or folder into place and make the rename durable."""
    if temp.is_file():
        with open(temp, "rb") as fh:
            os.fsync(fh.fileno())
    os.replace(temp, final)
    _fsync_dir(final.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    temp = temp_path_for(path)
    temp.write_bytes(data)
    publish(temp, path)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """Yield a temp path to write; it becomes ``path`` only if the block completes."""
    temp = temp_path_for(path)
    try:
        yield temp
        publish(temp, path)
    except BaseException:
        remove_tree(temp)
        raise


def remove_tree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_temp_files(root: Path) -> int:
    """Delete leftovers of killed writers below ``root``; only call while holding the writer's lock."""
    removed = 0
    if not root.exists():
        return 0
    for temp in list(root.rglob(f"{TEMP_PREFIX}*")):
        remove_tree(temp)
        removed += 1
    return removed


def parked_name(live: Path) -> Path:
    """Where swap_dirs parks the old folder while it has no atomic exchange (cleaned by the caller's repair)."""
    return live.parent / f"{TEMP_PREFIX}{live.name}-old.{os.getpid()}"


def swap_dirs(new: Path, live: Path) -> None:
    """Put folder ``new`` in place of ``live``; the old ``live`` (if any) ends up at ``new``'s path.

    Linux ``renameat2(RENAME_EXCHANGE)`` swaps the two atomically, so a reader sees
    either the old folder or the new one, never a mix; elsewhere the old one is parked
    under ``parked_name(live)`` for the two renames, where a repair after a crash finds it.
    """
    if not live.exists():
        os.rename(new, live)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    exchange = getattr(libc, "renameat2", None)
    if exchange is not None:
        at_fdcwd, rename_exchange = -100, 2
        if exchange(at_fdcwd, bytes(new), at_fdcwd, bytes(live), rename_exchange) == 0:
            return
        if ctypes.get_errno() not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(ctypes.get_errno(), f"cannot swap {new} and {live}")
    parked = parked_name(live)
    os.rename(live, parked)
    os.rename(new, live)
    os.rename(parked, new)
