"""``politeness.json`` in the crawl directory: what a queue's next request must wait for, across processes.

One small JSON object, written atomically (temp name, rename) every second while
a fetch runs and once more, marked ``clean``, when it ends::

    {"version": 1, "written_at": 1795000000.5, "clean": true,
     "queues": {"example.com": {"last_start": 1795000000.1, "hold_until": 1795000030.0,
                                "origins": {"https://example.com": 5.0}}}}

Times are wall-clock seconds (Unix epoch). The writer also records its boot
(``boot_id``, from /proc/sys/kernel/random/boot_id) and ``clock_offset``, its wall
clock minus its monotonic clock at the write: a reader on the same boot maps the
times back through the writer's offset, so they are the writer's monotonic stamps
exactly, and a wall-clock step between two rounds (NTP, a VM's clock sync) never
moves a recorded start closer. After a reboot the wall clock is all there is.
Only keys whose next start is still in the future are kept (a recent start, a
Crawl-delay, a Retry-After), so the file stays small whatever the crawl's size. Several processes (``fetcher.processes``,
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
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip() or None
    except OSError:  # not Linux, or /proc not mounted: wall-clock times only
        return None


def clock_offset() -> float:
    """Add to a ``time.monotonic()`` stamp to get wall-clock time, as of now."""
    return time.time() - time.monotonic()


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

    def shifted(self, by: float) -> QueueRecord:
        return QueueRecord(self.last_start + by, self.hold_until + by, self.origins)

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
        self._boot = boot_id()

    def load(self, log: Any = None, offset: float | None = None) -> Loaded | None:
        """The file's state, its times as wall clock at ``offset`` (default: now's) for this boot's stamps."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._warn(log, "read", exc)
            return None
        return self._parse(text, log, clock_offset() if offset is None else offset)

    def _parse(self, text: str, log: Any, offset: float) -> Loaded | None:
        try:
            raw = json.loads(text)
            shift = 0.0
            if self._boot is not None and raw.get("boot_id") == self._boot and "clock_offset" in raw:
                shift = offset - float(raw["clock_offset"])
            return Loaded(written_at=float(raw["written_at"]) + shift, clean=bool(raw.get("clean", False)),
                          queues={str(k): QueueRecord.from_json(v).shifted(shift)
                                  for k, v in raw.get("queues", {}).items()})
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._warn(log, "parse", exc)
            return None

    def save(self, records: dict[str, QueueRecord], clean: bool, log: Any = None,
             offset: float | None = None) -> None:
        """Merge ``records`` into the file (other processes' keys kept while still in the future).

        ``offset``: the one ``records``' monotonic stamps were turned into wall clock with (default: now's).
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                self._merge_write(records, clean, log, clock_offset() if offset is None else offset)
        except OSError as exc:
            self._warn(log, "write", exc)

    def _merge_write(self, records: dict[str, QueueRecord], clean: bool, log: Any, offset: float) -> None:
        now = time.time()
        merged = dict(records)
        previous = self.load(log, offset)
        if previous is not None:
            for key, record in previous.queues.items():
                if key in merged:
                    merged[key] = merged[key].merge(record)
                elif record.hold_until > now or record.last_start + _longest(record) > now:
                    merged[key] = record
        body = {"version": VERSION, "written_at": round(now, 6), "clean": clean, "pid": os.getpid(),
                **({"boot_id": self._boot, "clock_offset": offset} if self._boot else {}),
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
