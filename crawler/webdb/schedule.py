"""Fetch schedule: how long a page waits before its next fetch (``db.schedule``).

``fixed`` keeps each page's ``fetch_interval`` (``db.fetch_interval`` when it
was created). ``adaptive`` is Nutch's AdaptiveFetchSchedule: a page whose
content changed since the last fetch (another digest) is refetched sooner, its
interval shrunk by ``db.dec_rate``; an unchanged page (same digest, or a 304)
waits longer, grown by ``db.inc_rate``; always within ``db.min_interval`` and
``db.max_interval``. A first fetch (no earlier digest) says nothing about change
and keeps the interval. Like the status table, it is rendered to SQL so
updatedb applies it to all fetched pages at once.
"""

from __future__ import annotations

from collections.abc import Callable

from crawler.config import DbConfig
from crawler.statuses import FetchStatus


def _fixed(db: DbConfig, f: str, p: str) -> str:
    return f"{p}.fetch_interval"


def _adaptive(db: DbConfig, f: str, p: str) -> str:
    low, high = float(db.min_interval), float(max(db.max_interval, db.min_interval))

    def clamp(x: str) -> str:
        return f"greatest({low!r}, least({high!r}, {x}))"

    grow = clamp(f"{p}.fetch_interval * {1.0 + db.inc_rate!r}")
    shrink = clamp(f"{p}.fetch_interval * {1.0 - db.dec_rate!r}")
    success, notmodified = FetchStatus.SUCCESS.value, FetchStatus.NOTMODIFIED.value
    return f"""CASE
        WHEN {f}.status = '{notmodified}' THEN {grow}
        WHEN {f}.status = '{success}' AND {p}.digest IS NOT NULL AND {f}.digest = {p}.digest THEN {grow}
        WHEN {f}.status = '{success}' AND {p}.digest IS NOT NULL AND {f}.digest IS DISTINCT FROM {p}.digest
            THEN {shrink}
        ELSE {p}.fetch_interval END"""


SCHEDULES: dict[str, Callable[[DbConfig, str, str], str]] = {"fixed": _fixed, "adaptive": _adaptive}


def interval_sql(db: DbConfig, fetched: str = "f", page: str = "p") -> str:
    """SQL for a fetched page's new ``fetch_interval`` (``fetched``: the fetch record, ``page``: the page as it was)."""
    return SCHEDULES[db.schedule](db, fetched, page)
