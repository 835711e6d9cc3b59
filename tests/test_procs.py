"""The test helpers that signal asyncio children: a signal never steals a child's exit code from asyncio."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable

from tests.procs import kill_child, signal_child


async def _exit_code_while_signalled(signal_: Callable[[asyncio.subprocess.Process], None]) -> int:
    """Start a child that exits 3 at once and signal it (signal 0: no effect) until asyncio has its code."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "raise SystemExit(3)")
    while proc.returncode is None:
        signal_(proc)
        await asyncio.sleep(0)
    return await proc.wait()


async def test_signalling_a_child_as_it_exits_keeps_its_exit_code():
    """Popen.send_signal polls, and so reaps a just-exited child before asyncio's watcher, which then says 255."""
    codes = [await _exit_code_while_signalled(lambda p: signal_child(p, 0)) for _ in range(20)]
    assert codes == [3] * 20


async def test_kill_child_kills_a_running_child_and_ignores_a_finished_one():
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)")
    kill_child(proc)
    assert await proc.wait() == -signal.SIGKILL
    kill_child(proc)  # already reaped: no error, code unchanged
    assert proc.returncode == -signal.SIGKILL
