"""The settings of the bench crawl (compare.py's "crawler"), shared by every script that crawls the bench web.

Robots on, per-host concurrency 2, no delay, every output written; loopback hosts allowed. One
definition, so that an A/B in proc_cpu.py or write_steps.py measures the crawl compare.py reports.
"""

from __future__ import annotations

from pathlib import Path


def crawl_settings(concurrency: int = 256) -> list[str]:
    """The -D overrides of the bench crawl, but its crawl_dir."""
    return ["-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0",
            "-D", "fetcher.per_host_concurrency=2", "-D", f"fetcher.concurrency={concurrency}",
            "-D", "log.level=warning", "-D", "log.format=json"]


def crawl_args(seeds: Path, crawl_dir: Path, concurrency: int = 256) -> list[str]:
    """``crawl``'s arguments for the bench crawl of ``seeds`` into ``crawl_dir``."""
    return ["crawl", "--seeds", str(seeds), "--rounds", "30", "-D", f"crawl_dir={crawl_dir}",
            *crawl_settings(concurrency)]
