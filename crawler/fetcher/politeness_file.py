"""``politeness.json`` in the crawl directory: what a queue's next request must wait for, across processes.

One small JSON object, written atomically (temp name, rename) every second while
a fetch runs and once more, marked ``clean``, when it ends::

    {"version": 1, "written_at": 1795000000.5, "clean": true,
     "queues": {"example.com": {"last_start": 1795000000.1, "hold_until": 1795000030.0,
                                "origins": {"https://example.com": 5.0}}}}

Times are wall-clock seconds (Unix epoch). Only keys whose next start is still
in the future are kept (a recent start, a Crawl-delay, a Retry-After), so the
file stays small whatever the crawl's size. Several processes (``fetcher.processes``,
a ``crawl`` beside a ``fetch``) merge into it under an advisory lock: per key,
the latest start and the latest hold win. An unreadable file is reported and
ignored: politeness state is an optimisation of waiting, never a reason to stop.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig
from crawler.fsutil import atomic_write_text

VERSION = 1
FILE_NAME = "politeness.json"


def politeness_path(cfg: CrawlerConfig) -> Path:
    return cfg.crawl_path / FILE_NAME


@dataclass(slots=True)
class QueueRecord:
    last_start: float = -math.inf  # wall clock
    hold_until: float = -math.inf
    origins: dict[str, float | None] = field(default_factory=dict)  # origin -> Crawl-delay

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if math.isfinite(self.last_start):
            out["last_start"] = round(self.last_start, 6)
        if math.isfinite(self.hold_until):
            out["hold_until"] = round(self.hold_until, 6)
        if self.origins:
            out["origins"] = self.origins
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> QueueRecord:
        return cls(last_start=float(raw.get("last_start", -math.inf)),
                   hold_until=float(raw.get("hold_until", -math.inf)),
                   origins={str(o): (None if d is None else float(d)) for o, d in raw.get("origins", {}).items()})

    def merge(self, other: QueueRecord) -> QueueRecord:
        return QueueRecord(max(self.last_start, other.last_start), max(self.hold_until, other.hold_until),
                           {**other.origins, **self.origins})


@dataclass(slots=True)
class Loaded:
    written_at: float
    clean: bool
    queues: dict[str, QueueRecord]


class PolitenessFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._warned = False

    def load(self, log: Any = None) -> Loaded | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._warn(log, "read", exc)
            return None
        return self._parse(text, log)

    def _parse(self, text: str, log: Any) -> Loaded | None:
        try:
            raw = json.loads(text)
            return Loaded(written_at=float(raw["written_at"]), clean=bool(raw.get("clean", False)),
                          queues={str(k): QueueRecord.from_json(v) for k, v in raw.get("queues", {}).items()})
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._warn(log, "parse", exc)
            return None

    def save(self, records: dict[str, QueueRecord], clean: bool, log: Any = None) -> None:
        """Merge ``records`` into the file (other processes' keys kept while still in the future)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                self._merge_write(records, clean, log)
        except OSError as exc:
            self._warn(log, "write", exc)

    def _merge_write(self, records: dict[str, QueueRecord], clean: bool, log: Any) -> None:
        now = time.time()
        merged = dict(records)
        previous = self.load(log)
        if previous is not None:
            for key, record in previous.queues.items():
                if key in merged:
                    merged[key] = merged[key].merge(record)
                elif record.hold_until > now or record.last_start + _longest(record) > now:
                    merged[key] = record
        body = {"version": VERSION, "written_at": round(now, 6), "clean": clean, "pid": os.getpid(),
                "queues": {key: record.to_json() for key, record in sorted(merged.items())}}
        atomic_write_text(self.path, json.dumps(body, separators=(",", ":")) + "\n")

    def _warn(self, log: Any, action: str, exc: Exception) -> None:
        if log is not None and not self._warned:
            self._warned = True
            log.warning("politeness.state_unusable", file=str(self.path), action=action, error=str(exc))


def _longest(record: QueueRecord) -> float:
    # A key another process wrote is kept while any delay it may wait could still run.
    delays = [d for d in record.origins.values() if d is not None]
    return max(delays, default=0.0) + 60.0
