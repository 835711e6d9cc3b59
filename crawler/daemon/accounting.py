"""What a daemon cycle reports: the time of each phase, and the ``cycle.done`` summary, in logs, /status and /metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from structlog.contextvars import bound_contextvars

from crawler.daemon.fetches import RunningFetch
from crawler.daemon.status import DaemonStatus
from crawler.metrics import Metrics


class Accounting:
    def __init__(self, metrics: Metrics, status: DaemonStatus, fetching: Callable[[], bool], log: Any) -> None:
        self.metrics = metrics
        self.status = status
        self.fetching = fetching  # whether a fetch runs: the phase /status shows between two jobs
        self.log = log
        self.cycles = 0  # segments merged

    async def phase(self, name: str, phases: dict[str, float], func: Callable[..., Any], *args: Any) -> Any:
        """Run a synchronous job in a thread, with the phase bound in logs and shown in /status."""
        self.status.phase = name
        t0 = time.monotonic()
        with bound_contextvars(phase=name):
            try:
                return await asyncio.to_thread(func, *args)
            finally:
                phases[name] = phases.get(name, 0.0) + time.monotonic() - t0
                self.status.phase = "fetch" if self.fetching() else "idle"

    def failed(self, phases: dict[str, float] | None = None) -> None:
        self.metrics.cycle_finished("failed", None, phases or {})

    def stopped(self, phases: dict[str, float]) -> None:
        self.metrics.cycle_finished("stopped", None, phases)

    def done(self, fetch: RunningFetch, phases: dict[str, float], report: Any, figures: dict[str, Any]) -> None:
        """A cycle merged: count it, and report it in ``cycle.done``, /status's ``last_cycle`` and /metrics."""
        self.cycles += 1
        elapsed = time.monotonic() - fetch.started + (fetch.generate_seconds or 0.0)
        fetched = report.fetched if report is not None else figures["merged_fetched"]
        fetch_s = phases.get("fetch", 0.0)
        summary = {
            "cycle": fetch.number,
            "segment": fetch.segment.name,
            "selected": fetch.selected,
            "fetched": fetched,
            "bytes": report.bytes if report is not None else 0,
            "by_status": report.by_status if report is not None else {},
            "new_urls": figures["new_urls"],
            "version": figures["version"],
            "db_urls": figures["db_urls"],
            "pages_per_second": round(fetched / fetch_s, 2) if fetch_s else None,
            "elapsed_s": round(elapsed, 3),
            "phases_s": {k: round(v, 3) for k, v in phases.items()},
        }
        self.status.last_cycle = summary
        self.metrics.cycle_finished("done", elapsed, phases)
        self.log.info("cycle.done", **{k: v for k, v in summary.items() if k not in ("cycle", "segment")})
