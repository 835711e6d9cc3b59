"""One typed configuration tree, loaded once from ``config.yaml`` plus ``-D`` overrides.

Defaults live only on the fields below (and are repeated, with comments, in the
top-level ``config.yaml``). Unknown keys are rejected, so a typo stops the
command instead of being silently ignored. Every section is frozen: components
receive their own section and cannot change it under each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from crawler.errors import ConfigError
from crawler.units import parse_duration, parse_size

Duration = Annotated[float, BeforeValidator(parse_duration)]
Size = Annotated[int, BeforeValidator(parse_size)]
DEFAULT_CONFIG = Path("config.yaml")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class TimeoutConfig(Section):
    connect: Duration = 10.0
    read: Duration = 30.0
    total: Duration = 60.0


class HttpConfig(Section):
    agent_name: str = Field("crawler", min_length=1)
    user_agent: str = ""
    content_limit: Size = 8 * 1024 * 1024
    max_redirects: int = Field(5, ge=0, le=20)
    timeout: TimeoutConfig = TimeoutConfig()
    allow_private_networks: bool = False
    resolve: dict[str, str] = {}

    @property
    def effective_user_agent(self) -> str:
        from crawler import __version__

        return self.user_agent or f"{self.agent_name}/{__version__}"


class FetcherConfig(Section):
    concurrency: int = Field(256, ge=1)
    per_host_concurrency: int = Field(1, ge=1)
    queue_mode: Literal["host", "ip", "domain"] = "host"
    min_delay: Duration = 1.0
    max_crawl_delay: Duration = 30.0
    parse: bool = True
    commit_records: int = Field(2000, ge=1)
    commit_interval: Duration = 10.0


class GenerateConfig(Section):
    top_n: int = Field(50_000, ge=1)
    max_per_host: int = Field(0, ge=0)
    partitions: int = Field(1, ge=1, le=100_000)


class DbConfig(Section):
    fetch_interval: Duration = 30 * 86400.0
    max_interval: Duration = 90 * 86400.0
    retry_interval: Duration = 86400.0
    max_retries: int = Field(3, ge=0)
    ignore_external_links: bool = False
    max_outlinks: int = Field(100, ge=0)


class LogConfig(Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"
    file: str | None = None


class MetricsConfig(Section):
    listen: str = "127.0.0.1:9108"


class DaemonConfig(Section):
    seeds: str = "seeds"


class JobsConfig(Section):
    engine: Literal["duckdb", "spark"] = "duckdb"
    memory_limit: str = ""
    threads: int = Field(0, ge=0)


class CrawlerConfig(Section):
    crawl_dir: str = "."
    http: HttpConfig = HttpConfig()
    fetcher: FetcherConfig = FetcherConfig()
    generate: GenerateConfig = GenerateConfig()
    db: DbConfig = DbConfig()
    log: LogConfig = LogConfig()
    metrics: MetricsConfig = MetricsConfig()
    daemon: DaemonConfig = DaemonConfig()
    jobs: JobsConfig = JobsConfig()

    @property
    def crawl_path(self) -> Path:
        return Path(self.crawl_dir)


def _apply_override(tree: dict[str, Any], override: str) -> None:
    key, sep, raw = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"config error: -D {override!r}: expected dotted.key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    node = tree
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"config error: -D {key}: {'.'.join(parts[: i + 1])} is not a section")
        node = child
    node[parts[-1]] = value


def _describe(error: ValidationError, tree: dict[str, Any], source: str) -> str:
    first = error.errors()[0]
    path = ".".join(str(p) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        return f"config error ({source}): unknown key {path}"
    value = first.get("input")
    reason = first["msg"].removeprefix("Value error, ")
    return f"config error ({source}): {path} = {value!r}: {reason}"


def load_config(path: Path | str | None = None, overrides: list[str] | tuple[str, ...] = ()) -> CrawlerConfig:
    """Read ``path`` (default ``./config.yaml`` when present), apply ``-D`` overrides, validate.

    Raises ConfigError with one line naming the key path, the value and what is expected.
    """
    explicit = path is not None
    file = Path(path) if path is not None else DEFAULT_CONFIG
    tree: dict[str, Any] = {}
    source = str(file)
    if file.exists():
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"config error: {file}{where}: not valid YAML ({exc.__class__.__name__})") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config error: {file}: the top level must be a mapping of keys")
        tree = loaded or {}
    elif explicit:
        raise ConfigError(f"config error: {file}: no such file")
    else:
        source = "defaults"
    for override in overrides:
        _apply_override(tree, override)
    if overrides:
        source += " + -D"
    try:
        return CrawlerConfig.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, tree, source)) from exc


def with_overrides(cfg: CrawlerConfig, **sections: Any) -> CrawlerConfig:
    """A copy of ``cfg`` with some section fields replaced (for command-line flags like --top-n)."""
    updated = {}
    for name, fields in sections.items():
        updated[name] = getattr(cfg, name).model_copy(update=fields)
    return cfg.model_copy(update=updated)
