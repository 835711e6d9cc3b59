"""Prometheus metrics of a running crawl (DESIGN section 6), fed by typed fetch events and cycle results.

The metric names are a contract: dashboards and alerts depend on them. Each
``Metrics`` owns its own registry (no module-level state), so a test or a second
daemon in one process never sees another's counts.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from crawler.fetcher.events import FetchDone, FetchProgress

__all__ = ["CONTENT_TYPE_LATEST", "Metrics", "status_label"]

FETCH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
OVER_CAP_LABELS = {"outlinks": "db.max_outlinks", "sitemap_urls": "sitemap.max_urls"}  # UpdateReport.over_cap keys
CYCLE_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 21600, 86400)


def status_label(event: FetchDone) -> str:
    """The HTTP status class (``2xx``...) when a response came back, else the failure kind or fetch status."""
    if event.http_status:
        return f"{event.http_status // 100}xx"
    return event.error_kind or event.status


class Metrics:
    """The daemon's metrics; also a ``FetchObserver`` (``fetch_done``, ``progress``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pages = Counter("crawler_pages_fetched_total", "URLs fetched, by HTTP status class or failure kind",
                             ["status"], registry=r)
        self.bytes = Counter("crawler_bytes_fetched_total", "Response body bytes fetched (as served)", registry=r)
        self.errors = Counter("crawler_fetch_errors_total", "Fetches that failed without a response, by kind",
                              ["kind"], registry=r)
        self.fetch_seconds = Histogram("crawler_fetch_duration_seconds", "Time to fetch one URL",
                                       buckets=FETCH_BUCKETS, registry=r)
        self.queued = Gauge("crawler_queued_entries", "Fetchlist entries waiting in host queues", registry=r)
        self.in_flight = Gauge("crawler_in_flight_requests", "Requests in flight", registry=r)
        self.active_hosts = Gauge("crawler_active_hosts", "Host queues with work", registry=r)
        self.db_pages = Gauge("crawler_webdb_pages", "URLs in the live webdb version, by status", ["status"],
                              registry=r)
        self.db_version = Gauge("crawler_webdb_version", "Number of the live webdb version", registry=r)
        self.over_cap = Counter("crawler_outlinks_over_cap_total", "Outlinks updatedb did not queue because of a cap, "
                                "by the key that cut them (db.max_outlinks, sitemap.max_urls)", ["cap"], registry=r)
        for cap in OVER_CAP_LABELS.values():
            self.over_cap.labels(cap)  # shown at 0 from the start: a cut is what a dashboard looks for
        self.cycles = Counter("crawler_cycles_total", "Crawl cycles, by outcome (done, idle, failed, stopped)",
                              ["outcome"], registry=r)
        self.cycle_seconds = Histogram("crawler_cycle_duration_seconds", "Duration of a whole crawl cycle",
                                       buckets=CYCLE_BUCKETS, registry=r)
        self.phase_seconds = Histogram("crawler_phase_duration_seconds", "Duration of one phase of a cycle",
                                       ["phase"], buckets=CYCLE_BUCKETS, registry=r)
        self.segments_fetching = Gauge("crawler_segments_fetching", "Segments being fetched at once (more than 1 "
                                       "while the daemon overlaps segments)", registry=r)
        self.config_reloads = Counter("crawler_config_reloads_total", "SIGHUP reloads, by result (ok, invalid)",
                                      ["result"], registry=r)
        self.generate_runs = Counter("crawler_generate_runs_total", "generate jobs the daemon ran, by what they "
                                     "found (segment, nothing)", ["found"], registry=r)
        self.generate_skipped = Counter("crawler_generate_skipped_total", "Wake-ups that ran no generate because "
                                        "nothing that could change its answer had changed, by what woke the daemon "
                                        "(host_freed, idle_sleep, seeds)", ["reason"], registry=r)
        self._progress: dict[str, FetchProgress] = {}

    # --- FetchObserver ---

    def fetch_done(self, event: FetchDone) -> None:
        self.pages.labels(status_label(event)).inc()
        if event.bytes:
            self.bytes.inc(event.bytes)
        if event.error_kind:
            self.errors.labels(event.error_kind).inc()
        self.fetch_seconds.observe(event.elapsed)

    def progress(self, event: FetchProgress) -> None:
        # The daemon fetches any number of segments at once: the gauges show the sum over the running ones
        # (a host in two of them counts twice in active_hosts).
        self._progress[event.segment] = event
        self._set_gauges()

    def fetch_ended(self, segment: str) -> None:
        self._progress.pop(segment, None)
        self._set_gauges()

    def _set_gauges(self) -> None:
        running = self._progress.values()
        self.queued.set(sum(p.queued for p in running))
        self.in_flight.set(sum(p.in_flight for p in running))
        self.active_hosts.set(sum(p.active_hosts for p in running))

    # --- cycle results ---

    def cycle_finished(self, outcome: str, seconds: float | None, phases: Mapping[str, float]) -> None:
        self.cycles.labels(outcome).inc()
        if seconds is not None:
            self.cycle_seconds.observe(seconds)
        for phase, spent in phases.items():
            self.phase_seconds.labels(phase).observe(spent)

    def outlinks_cut(self, over_cap: Mapping[str, int]) -> None:
        """One updatedb's ``UpdateReport.over_cap``."""
        for key, cap in OVER_CAP_LABELS.items():
            if over_cap.get(key):
                self.over_cap.labels(cap).inc(over_cap[key])

    def webdb(self, version: int, by_status: Mapping[str, int]) -> None:
        self.db_version.set(version)
        for status, count in by_status.items():
            self.db_pages.labels(status).set(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)
