"""Progress of a batch job: a rich bar on a terminal, ``job.progress`` log events otherwise.

A job is a few big SQL statements, so progress is counted in steps (``read
segments``, ``write pages``...), not rows. On a terminal the bar is drawn on
stderr and vanishes when the job ends (stdout stays clean for results);
elsewhere each step start is one log event with the time spent so far, which
is what someone tailing a daemon's JSON log wants to see.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any


class JobProgress:
    def __init__(self, job: str, steps: int, log: Any, terminal: bool | None = None) -> None:
        self.job = job
        self.steps = steps
        self.log = log
        self.done = 0
        self.started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        if terminal if terminal is not None else sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn(f"{job} [bold]{{task.description}}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )

    def __enter__(self) -> JobProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task("starting", total=self.steps)
        return self

    def step(self, name: str) -> None:
        """Mark the start of step ``name`` (the steps before it are done)."""
        if self._bar is not None:
            self._bar.update(self._task, description=name, completed=self.done)
        else:
            self.log.info(
                "job.progress",
                job=self.job,
                step=name,
                done=self.done,
                steps=self.steps,
                elapsed_s=round(time.monotonic() - self.started, 2),
            )
        self.done += 1

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
