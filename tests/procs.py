"""Signal an asyncio child process without reaping it behind asyncio's back.

Before Python 3.13, ``asyncio.subprocess.Process.send_signal`` (and ``kill``,
``terminate``) went through ``subprocess.Popen.send_signal``, which first polls
the child with ``waitpid(WNOHANG)``. A child that has just exited is reaped by
that poll, and asyncio's child-watcher thread, waiting on the same pid, then
reports exit code 255 ("Unknown child process pid"): CPython gh-87744, fixed in
3.13 by sending the signal with ``os.kill``. A test that signals a child which
may be finishing on its own (the SIGKILL-at-random-moments test) read that 255
as a crash of the crawler. These helpers do what 3.13 does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


def signal_child(proc: asyncio.subprocess.Process, sig: int) -> None:
    """Send ``sig`` to ``proc`` unless it is known to have exited; a zombie ignores it, and asyncio reaps it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)


def kill_child(proc: asyncio.subprocess.Process) -> None:
    signal_child(proc, signal.SIGKILL)
