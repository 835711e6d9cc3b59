"""The fork server a parse pool's processes are forked from (multiprocessing's "forkserver" method).

The server imports the pool's own side once (``PRELOAD``: the pipes, the job framing, the WARC encoder,
the parser dispatch; no pydantic, no asyncio); each process of a pool is then a fork of it, ready in a few
milliseconds, where a spawned process started an interpreter and did those imports itself (~0.4 CPU s
each, three processes a pool). That is what made a pool too dear for a crawl of a few hundred pages
(``fetcher.parse_pool_min_entries``). The parsers' libraries (selectolax, ada-url, StringZilla) are
loaded by each parse process as it builds its dispatch: preloaded, the part writer would carry them too.

``warm_up`` starts the server as soon as the command knows it may want a pool (cli.py, before the
command's own imports), so the server's imports run on another core while the command starts. The
server forks from a single-threaded process, which a plain fork of the fetch process (DuckDB's and
asyncio's threads) would not be. It holds no pyarrow: the part writer imports it after its fork, and
the parse processes never do. ``stop`` ends the server and reaps it, so that its CPU counts as the
command's children's; without it the server still exits with the command (its pipe closes).

Once a pool's processes are forked the server has nothing left to do but wait for them to exit, and it
was ~23 MB resident beside the fetch (a sixteenth of a crawl's summed peak): ``hand_over`` ends it there,
the command adopting the pool's processes (Linux's child subreaper, set only while the server exits), so
that the pool reaps them itself and their CPU still counts as the command's children's. A pool started
later starts a new server (``ensure_running``), as ``crawl``'s next round did already.

This module imports nothing heavy (multiprocessing's fork server, ~20 ms): cli.py imports it, for the
commands that may want a pool only, before loading the fetcher.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from multiprocessing import forkserver, resource_tracker
from typing import Any

PRELOAD = ["crawler.fetcher.parsepool"]
_STATE = {"started": False}


def context() -> Any:
    """The multiprocessing context of the parse pools."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def wanted(cfg: Any) -> bool:
    """Whether a fetch with this config may parse in a pool (``fetcher.parse``, ``fetcher.parse_processes``):
    the one test of it, for the cli, crawl's and fetch's RoundsPool and the daemon."""
    return bool(cfg.fetcher.parse) and cfg.fetcher.parse_processes >= 1


@contextlib.contextmanager
def safe_path() -> Iterator[None]:
    """Within it, a fork server started (by ``ensure_running``, or by multiprocessing itself when a process
    starts and finds the server gone) leaves the working directory off its sys.path.

    The server is a `python -c`, which puts the working directory first on its sys.path: a `crawler` package
    there (a checkout of another version, a folder of that name) was what it preloaded, and the pool's
    processes forked from it ran that code (bench/ runs from the repository: an --tree contender's pool ran
    the current tree). PYTHONSAFEPATH (Python 3.11+) leaves the directory out.
    """
    safe = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if safe is None:
            del os.environ["PYTHONSAFEPATH"]
        else:
            os.environ["PYTHONSAFEPATH"] = safe


def ensure_running() -> None:
    """Start the server unless it runs: ``warm_up``, and every pool before it forks (ParsePool, which starts
    its processes within ``safe_path`` too, for a server that died meanwhile)."""
    context()
    with safe_path():
        forkserver.ensure_running()


def warm_up() -> bool:
    """Start the server now (it does its imports meanwhile); True if this call started it."""
    if _STATE["started"]:
        return False
    ensure_running()
    _STATE["started"] = True
    return True


def stop() -> None:
    """Stop the server ``warm_up`` started and the resource tracker started with it, and wait for them.

    Nothing to do where ``hand_over`` ended the server already (the pool ended the tracker as it forked).
    Otherwise the server has reaped every pool process by now (a pool's ``close`` returns once the server
    told it each one's exit), so their CPU still counts as the command's.
    """
    if not _STATE["started"]:
        return
    _STATE["started"] = False
    _end_server()
    stop_tracker()


def _end_server() -> None:
    """SIGTERM the server, then multiprocessing's own stop, which reaps it.

    SIGTERM first: on its pipe's EOF alone the server raises SystemExit, and its interpreter then frees
    every module it preloaded one object at a time (50-150 ms on 2 cores, which the command waited for at
    the end of every ``crawl`` and ``fetch``). The server holds no file or buffer that a teardown would
    complete, and installs no SIGTERM handler.
    """
    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = getattr(server, "_stop", None)  # CPython 3.8-3.14: closes its pipe, reaps it, removes its socket
    if end is not None:
        end()


# prctl(2): orphans among this process's descendants become its children, not init's (Linux 3.4+).
_PR_SET_CHILD_SUBREAPER = 36


def _subreaper(on: bool) -> bool:
    import ctypes  # on use: the command's start does without it

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no Linux prctl: the server stays, as before
        return False
    return bool(prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)


def hand_over() -> bool:
    """End the server now that a pool's processes are forked, this process adopting them: True if it did
    (the caller then reaps them, ``reap``); False where it cannot (no subreaper), the server left running.

    The subreaper flag is set only while the server exits, so that its children alone are adopted: an
    orphan of another descendant (a Spark worker, say) still goes to init, and leaves no zombie here.
    """
    server = forkserver._forkserver
    if getattr(server, "_forkserver_pid", None) is None or not hasattr(server, "_stop") or not _subreaper(True):
        return False
    try:
        _end_server()  # its children are reparented to this process as it exits, before it is reaped
    finally:
        _subreaper(False)
    _STATE["started"] = False  # gone, whoever started it: a later pool starts a new one
    return True


def reap(pid: int, timeout: float) -> None:
    """Wait up to ``timeout`` s for an adopted pool process to exit, then SIGTERM it; either way reap it,
    so that no zombie is left and its CPU counts as this process's children's."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # reaped already
        if done:
            return
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            return
        time.sleep(pause)
        pause = min(2 * pause, 0.01)


def stop_tracker() -> None:
    """End multiprocessing's resource tracker, a process of its own (~13 MB resident): a pool holds no
    semaphore or shared memory for it to clean up. multiprocessing starts it with the fork server and again
    for each process the server forks, so ``ParsePool`` ends it once its processes are started, and
    ``stop`` with the server."""
    tracker = resource_tracker._resource_tracker
    lock = getattr(tracker, "_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        fd, pid = getattr(tracker, "_fd", None), getattr(tracker, "_pid", None)
        if fd is None or pid is None:  # not running, or not this process's
            return
        # The server and the pool's processes hold its pipe too, so closing ours would end it only once they
        # are gone; it ignores SIGTERM and SIGINT. A tracker found gone is started anew, without a warning,
        # by the next process the server forks.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.close(fd)
        tracker._fd = None
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        tracker._pid = None
