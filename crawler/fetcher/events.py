"""Typed fetch events for observers (metrics, status pages), so the fetcher knows no metrics library."""

from __future__ import annotations

import typing
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FetchDone:
    url: str
    host: str
    status: str  # fetch status (success, gone, retry, ...)
    http_status: int | None
    error_kind: str | None  # dns, connect, timeout, ... when the fetch failed
    bytes: int
    elapsed: float  # seconds


@dataclass(frozen=True, slots=True)
class FetchProgress:
    segment: str
    pages_per_second: float
    bytes_per_second: float
    in_flight: int
    queued: int
    active_hosts: int
    fetched: int


class FetchObserver(typing.Protocol):
    def fetch_done(self, event: FetchDone) -> None: ...

    def progress(self, event: FetchProgress) -> None: ...


class NullObserver:
    def fetch_done(self, event: FetchDone) -> None:
        pass

    def progress(self, event: FetchProgress) -> None:
        pass
