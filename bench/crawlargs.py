"""The settings of the bench crawl (compare.py's "crawler"), shared by every script that crawls the bench web.

Robots on, per-host concurrency 2, no delay, every output written; loopback hosts allowed. One
definition, so that an A/B in proc_cpu.py or write_steps.py measures the crawl compare.py reports.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

_COMPILED: set[Path] = set()


def crawl_settings(concurrency: int = 256) -> list[str]:
    """The -D overrides of the bench crawl, but its crawl_dir."""
    return ["-D", "http.allow_private_networks=true", "-D", "fetcher.min_delay=0",
            "-D", "fetcher.per_host_concurrency=2", "-D", f"fetcher.concurrency={concurrency}",
            "-D", "log.level=warning", "-D", "log.format=json"]


def crawl_args(seeds: Path, crawl_dir: Path, concurrency: int = 256) -> list[str]:
    """``crawl``'s arguments for the bench crawl of ``seeds`` into ``crawl_dir``."""
    return ["crawl", "--seeds", str(seeds), "--rounds", "30", "-D", f"crawl_dir={crawl_dir}",
            *crawl_settings(concurrency)]


def crawler_env(tree: Path | str) -> dict[str, str]:
    """The environment of a crawler run from source tree ``tree`` (on top of the bench's own): the tree
    first on the path, and its bytecode cached as a user's install has it. The sessions that run these
    benches set PYTHONDONTWRITEBYTECODE, and a fresh tree has no __pycache__, so every crawler process
    (the command, the parse pool's fork server) compiled the crawler's ~100 modules at each start
    (~140 ms of a ~0.7 s start; docs/benchmarks.md "Start-up"). The tree is compiled once here, before
    anything is timed, and the crawler may write the caches of what it imports besides."""
    root = Path(tree).resolve()
    if root not in _COMPILED:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "crawler")], check=True)
        _COMPILED.add(root)
    return {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": ""}


def log_time(event: dict) -> float:
    """The time (as time.time()) of one event of a crawl's JSON log."""
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
