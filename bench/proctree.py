"""Peak memory of a whole process tree, sampled from /proc (issue 19).

wait4 reports the largest RSS any one process of a contender reached; a crawler that fetches in one
process, parses in a pool and writes parts in another holds its pages in all of them at once, so the
figure that matters is the sum over the tree. A thread of the driver walks the contender's
descendants every 100 ms (/proc/PID/task/TID/children: a child is listed under the thread that
forked it) and sums their resident set (/proc/PID/statm, resident pages); the peak of that sum and
the most processes alive at once are kept. Shared pages (libraries, a forked child's copy-on-write
pages) count in every process that maps them, as in the issue's figures and `ps`; a sample can miss
a peak shorter than the interval. ``BusySampler`` reads /proc/stat on the same clock: how busy all cores
were between two moments (bench/phases.py).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Self

PAGE = os.sysconf("SC_PAGE_SIZE")


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (not itself), found through each thread's children list."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:  # gone since it was listed
            continue
        for tid in tasks:
            try:
                children = Path(f"/proc/{parent}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                todo.append(child)
    return found


def rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):  # exited between the listing and the read
        return 0


def name_of(pid: int) -> str:
    """What a process is, for a reader: its command line, shortened (a parse process and a fork server
    are all `python -c ...`, told apart by their arguments)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(a.decode(errors="replace") for a in argv if a)[:90]


class _Periodic:
    """Calls ``sample()`` in a thread every ``interval`` seconds, from ``with`` to its end."""

    def __init__(self, interval: float, name: str) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def sample(self) -> object:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class TreeSampler(_Periodic):
    """Samples the summed RSS of ``pid``'s descendants (and of ``pid`` itself unless ``skip_root``:
    the launcher of a contender is ours, not the contender's) in a thread, until stopped."""

    def __init__(self, pid: int, interval: float = 0.1, skip_root: bool = True) -> None:
        super().__init__(interval, f"rss-sampler-{pid}")
        self.pid, self.skip_root = pid, skip_root
        self.peak_bytes = 0
        self.peak_processes = 0
        self.samples = 0
        self.peak_parts: list[tuple[int, str, float]] = []  # (pid, name, MB) of each process at the peak

    def sample(self) -> int:
        """One sample now: the summed RSS in bytes (the peaks are updated)."""
        pids = descendants(self.pid) + ([] if self.skip_root else [self.pid])
        sizes = [(p, rss_bytes(p)) for p in pids]
        total = sum(size for _, size in sizes)
        if total > self.peak_bytes:
            self.peak_bytes = total
            self.peak_parts = [(p, name_of(p), size / 2**20) for p, size in sizes]
        self.peak_processes = max(self.peak_processes, sum(1 for p in pids if os.path.exists(f"/proc/{p}")))
        self.samples += 1
        return total

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / 2**20


class BusySampler(_Periodic):
    """/proc/stat every ``interval`` seconds: the share of all cores busy between two moments."""

    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(interval, "busy-sampler")
        self.samples: list[tuple[float, list[int]]] = []

    def sample(self) -> list[int]:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        self.samples.append((time.time(), values))
        return values

    def busy(self, start: float, end: float) -> float | None:
        """The busy share (0-1) between ``start`` and ``end`` (time.time()), None with under two samples."""
        inside = [values for at, values in self.samples if start <= at <= end]
        if len(inside) < 2:
            return None
        delta = [b - a for a, b in zip(inside[0], inside[-1], strict=True)]
        return 1 - (delta[3] + delta[4]) / max(sum(delta), 1)  # idle and iowait
