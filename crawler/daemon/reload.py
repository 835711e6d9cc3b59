"""SIGHUP: reload ``config.yaml`` (plus the original ``-D`` overrides) and say what changes when.

Most keys are read afresh by each cycle, so they apply from the next cycle.
Fetcher limits (concurrency, per-host limits, delays) also reach a running fetch
when the fetcher can be reconfigured, and the log section applies at once. Keys
that name where the daemon lives or listens need a restart: they keep their old
value and the reload says so, because moving ``crawl_dir`` under a running
cycle would split it between two crawls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.config import CrawlerConfig, load_config

RESTART_KEYS = ("crawl_dir", "metrics.listen")


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value and key != "resolve":
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def changed_keys(old: CrawlerConfig, new: CrawlerConfig) -> list[str]:
    before, after = flatten(old.model_dump()), flatten(new.model_dump())
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


@dataclass
class Reload:
    config: CrawlerConfig  # what the daemon runs on from now: the new config, restart keys kept as they were
    changed: list[str] = field(default_factory=list)
    restart_required: list[str] = field(default_factory=list)

    def keys(self, prefix: str) -> list[str]:
        return [k for k in self.changed if _under(k, prefix)]


class ConfigSource:
    """Where the config came from (file and ``-D`` overrides), so it can be read again."""

    def __init__(self, path: Path | str | None, overrides: list[str], current: CrawlerConfig) -> None:
        self.path = path
        self.overrides = list(overrides)
        self.current = current

    def reload(self) -> Reload:
        """Read the config again; raises ConfigError (and keeps the current one) when it is invalid."""
        new = load_config(self.path, self.overrides)
        old = self.current
        changed = changed_keys(old, new)
        restart = [k for k in changed if any(_under(k, r) for r in RESTART_KEYS)]
        if restart:
            new = new.model_copy(update={"crawl_dir": old.crawl_dir, "metrics": old.metrics})
        self.current = new
        return Reload(new, [k for k in changed if k not in restart], restart)
