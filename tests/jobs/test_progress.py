from __future__ import annotations

import structlog
from structlog.testing import capture_logs

from crawler.jobs.progress import JobProgress


def test_logs_one_event_per_step_off_a_terminal():
    """Off a terminal each step start is a job.progress event with the job, step name and counts."""
    with capture_logs() as logs, JobProgress("demo", 2, structlog.get_logger(), terminal=False) as progress:
        progress.step("first")
        progress.step("second")
    assert [(e["event"], e["job"], e["step"], e["done"], e["steps"]) for e in logs] == [
        ("job.progress", "demo", "first", 0, 2),
        ("job.progress", "demo", "second", 1, 2),
    ]


def test_draws_on_stderr_on_a_terminal_and_logs_nothing(capsys):
    """On a terminal the progress goes to a bar on stderr, not to the log, and stdout stays empty."""
    with capture_logs() as logs, JobProgress("demo", 1, structlog.get_logger(), terminal=True) as progress:
        progress.step("only")
    captured = capsys.readouterr()
    assert logs == [] and captured.out == ""
