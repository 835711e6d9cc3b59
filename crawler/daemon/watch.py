"""Watch ``daemon.seeds``: a seed file that appears (or changes) wakes an idle daemon within about a second.

watchfiles (inotify on Linux, the OS's notifications elsewhere; set
``WATCHFILES_FORCE_POLLING=1`` where none reach, as on some network and
container mounts) reports the changes; hidden names are ignored, as inject
ignores them (a file written under a hidden name and renamed in is seen once,
whole). A file copied in place is reported while it is still being written, so
the wake-up waits until every changed file has stood still for ``SETTLE``
seconds: an inject of half a file would take a cut last line for a URL.

The folder is read from the config again every ``RECHECK`` seconds (SIGHUP may
move it); a folder that does not exist yet is looked for as often, and its
appearance is a change. If the watch cannot be set up (say, the inotify watch
limit), the daemon says so once and still finds new seeds each
``daemon.idle_sleep``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchfiles import Change, awatch

RECHECK = 1.0  # seconds: how often the folder's name (and, while missing, its existence) is looked at again
SETTLE = 0.3  # seconds a changed seed file must stand still before it is read
STEP_MS = 200  # watchfiles yields once no further change came for this long

logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every change at INFO


def is_seed_change(change: Change, path: str) -> bool:
    """A seed file added or modified; deletions change nothing (inject never takes URLs back)."""
    return change != Change.deleted and not Path(path).name.startswith(".")


async def settled(paths: set[Path], stop: asyncio.Event) -> None:
    """Return once none of ``paths`` was modified in the last SETTLE seconds (or the daemon stops)."""
    while not stop.is_set():
        newest = 0.0
        for path in paths:
            with contextlib.suppress(OSError):  # gone again: nothing to wait for
                newest = max(newest, path.stat().st_mtime)
        left = newest + SETTLE - time.time()
        if left <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), min(left, SETTLE))


async def watch_seeds(folder: Callable[[], Path], changed: Callable[[], None], stop: asyncio.Event,
                      log: Any) -> None:
    """Call ``changed()`` whenever seed files appear or change in ``folder()``, until ``stop`` is set."""
    unwatchable: Path | None = None  # the folder whose watch failed (said once)
    appeared = False
    while not stop.is_set():
        path = folder()
        if path.is_dir() and path != unwatchable:
            try:
                await _watch(path, folder, changed, stop, announce=appeared)
            except OSError as exc:  # the inotify watch limit, a folder removed as the watch was set up
                if path.is_dir():
                    unwatchable = path
                    log.warning("daemon.seeds_unwatched", folder=str(path), error=str(exc),
                                fallback="new seed files are found every daemon.idle_sleep")
            appeared = False
            continue
        missing = not path.is_dir()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RECHECK)
        appeared = missing and path.is_dir()


async def _watch(path: Path, folder: Callable[[], Path], changed: Callable[[], None], stop: asyncio.Event, *,
                 announce: bool) -> None:
    """Watch ``path`` until the daemon stops, the config names another folder or ``path`` goes away.

    ``announce``: the folder has just appeared; files may be in it already, so the first look (once the
    watch is set up, and nothing written from then on can be missed) is a change too.
    """
    async for changes in awatch(path, watch_filter=is_seed_change, step=STEP_MS, recursive=False,
                                rust_timeout=int(RECHECK * 1000), yield_on_timeout=True):
        if changes:
            await settled({Path(p) for _, p in changes}, stop)
        if changes or announce:
            announce = False
            changed()
        if stop.is_set() or folder() != path or not path.is_dir():
            return
