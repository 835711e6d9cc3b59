"""One typed configuration tree, loaded once from ``config.yaml`` plus ``-D`` overrides.

Defaults live only on the fields below (and are repeated, with comments, in the
top-level ``config.yaml``). Unknown keys are rejected, so a typo stops the
command instead of being silently ignored. Every section is frozen: components
receive their own section and cannot change it under each other.
"""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from crawler.crawldir import check_crawl_dir, local_crawl_path
from crawler.errors import ConfigError
from crawler.units import parse_duration, parse_size

Duration = Annotated[float, BeforeValidator(parse_duration)]
Size = Annotated[int, BeforeValidator(parse_size)]
DEFAULT_CONFIG = Path("config.yaml")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic takes true as 1: `top_n: yes` would silently mean one URL per segment.
        if isinstance(value, bool) and cls.model_fields[info.field_name].annotation in (int, float):
            raise ValueError("expected a number, not true/false")
        return value


class TimeoutConfig(Section):
    connect: Duration = 10.0
    read: Duration = 30.0
    total: Duration = 60.0


class DnsConfig(Section):
    cache_ttl: Duration = 300.0
    negative_ttl: Duration = 60.0
    max_lookups: int = Field(32, ge=1)


def _check_network(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise ValueError("expected an address or a network like 127.0.0.0/8") from exc
    return value


def _check_ca_file(value: str) -> str:
    # Loaded here, so a missing or non-PEM bundle stops the command with the key named, before any fetch.
    if value:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=value)
        except FileNotFoundError:
            raise ValueError("no such file") from None
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"not a readable PEM bundle of CA certificates ({exc.__class__.__name__})") from None
    return value


class TlsConfig(Section):
    verify: bool = True
    ca_file: Annotated[str, AfterValidator(_check_ca_file)] = ""


_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def check_proxy_url(value: str) -> str:
    if value:
        scheme, sep, rest = value.partition("://")
        if not sep or scheme.lower() not in _PROXY_SCHEMES or not rest.strip("/"):
            raise ValueError("expected a proxy URL like http://host:3128, https://host:3129 or socks5://host:1080")
    return value


def check_bypass_entry(value: str) -> str:
    entry = value.strip()
    if not entry or any(c in entry for c in " /:") and not _is_network(entry):
        raise ValueError("expected a host name (example.com also covers its subdomains), an address or a network")
    return entry


def _is_network(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


class HttpConfig(Section):
    agent_name: str = Field("crawler", min_length=1)
    user_agent: str = ""
    content_limit: Size = 8 * 1024 * 1024
    max_redirects: int = Field(5, ge=0, le=20)
    timeout: TimeoutConfig = TimeoutConfig()
    allow_private_networks: bool = False
    private_allowlist: list[Annotated[str, AfterValidator(_check_network)]] = []
    resolve: dict[str, str] = {}
    dns: DnsConfig = DnsConfig()
    tls: TlsConfig = TlsConfig()
    proxy: Annotated[str, AfterValidator(check_proxy_url)] = ""
    proxy_bypass: list[Annotated[str, AfterValidator(check_bypass_entry)]] = []
    trust_env: bool = False

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
    commit_bytes: Size = Field(8 * 1024 * 1024, ge=1)  # bodies, text and outlinks held (crawler/segments/held.py)
    delay_factor: float = Field(0.0, ge=0.0)
    max_delay: Duration = 30.0
    max_exceptions_per_queue: int = Field(10, ge=0)
    time_limit: Duration = 0.0
    processes: int = Field(1, ge=1, le=256)
    # Parse in this many worker processes (crawl starts them for each fetch, the daemon keeps them); 0 = in
    # the fetch process. "auto" (the default): one per usable core. With its parsing handed over, the fetch
    # process uses ~0.4 of a core, so one parse process per core but one left a core part idle and made that
    # one process the limit (docs/benchmarks.md, "Parse processes on every core": the SciPy tree 8.3 -> 7.1 s).
    parse_processes: int = Field("auto", ge=0, le=256)  # type: ignore[assignment]
    # How much lower the parse processes run than the fetch process (os.nice's increment, added to the
    # command's own niceness; 0 = the same). The fetch process drives every request and hands the pages out,
    # and on 2 cores it shares them with the parse processes: at the same priority it waited ~1.3 s for a
    # core in a 5 s crawl of Boost's tree (0.5-0.8 s with them at +10). Lower, they get what it leaves: the
    # seven real trees 1.6-3.6 % faster in all at +10 and +15, those of small pages (Boost, libstdc++)
    # 4-12 % (docs/benchmarks.md, "The parse processes run at a lower priority").
    parse_nice: int = Field(10, ge=0, le=19)
    # A pool's processes are forks of a server that did their imports at the command's start
    # (crawler/fetcher/forkserver.py): ready in ~60-200 ms for ~0.3 CPU s on the other cores. Started with
    # the first page it pays even on a crawl of a few hundred pages: the seven real trees, alternating,
    # medians of 3, 32.3 s in all with 100 here, 30.5 with 0, no tree slower (django 2.67 -> 2.28 s;
    # docs/benchmarks.md, "Parse pool from the first page"). A larger value keeps small fetches (a handful
    # of seeds) in the fetch process, which saves the pool's memory until a round is that large.
    parse_pool_min_entries: int = Field(0, ge=0)
    # In-round following (crawler/fetcher/follow.py): a page's same-origin outlinks that the webdb does not
    # know are fetched in the same fetch, up to this many link hops from a fetchlist entry; 0 = off (new links
    # wait for updatedb and the next round). Without it a site costs one round per level of its link tree.
    follow_depth: int = Field(1000, ge=0)
    follow_max_per_host: int = Field(10000, ge=0)  # URLs one fetch follows on one host; the rest wait a round
    follow_max_queued: int = Field(50000, ge=0)  # followed URLs waiting in the host queues at once; the rest wait a round
    progress_interval: Duration = 10.0
    watchdog_after: Duration = Field(0.0, ge=0.0)  # a request in flight longer is logged as stuck; 0 = 2 x http.timeout.total + 5 s

    @field_validator("parse_processes", mode="before")
    @classmethod
    def _auto_parse_processes(cls, value: Any, info: ValidationInfo) -> Any:
        if value != "auto":
            return value
        # Only a lone fetch process keeps a pool (with fetcher.processes above 1 each parses its own pages).
        return usable_cores() if info.data.get("processes", 1) == 1 else 0


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container's cpuset limits)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class RobotsConfig(Section):
    cache_ttl: Duration = Field(86400.0, ge=0.0, le=86400.0)


class FileProtocolConfig(Section):
    enabled: bool = False


class ProtocolsConfig(Section):
    file: FileProtocolConfig = FileProtocolConfig()


class GenerateConfig(Section):
    top_n: int = Field(50_000, ge=1)
    max_per_host: int = Field(0, ge=0)
    partitions: int = Field(1, ge=1, le=100_000)
    count_mode: Literal["host", "domain", "ip"] = "host"


class DbConfig(Section):
    fetch_interval: Duration = 30 * 86400.0
    max_interval: Duration = 90 * 86400.0
    retry_interval: Duration = 86400.0
    max_retries: int = Field(3, ge=0)
    ignore_external_links: bool = False
    max_outlinks: int = Field(5000, ge=0)  # 0 = no cap
    schedule: Literal["fixed", "adaptive"] = "fixed"
    min_interval: Duration = 3600.0
    inc_rate: float = Field(0.4, ge=0.0, le=1.0)
    dec_rate: float = Field(0.2, ge=0.0, lt=1.0)
    score_injected: float = Field(1.0, ge=0.0)


def _check_filter_rule(rule: str) -> str:
    if rule[:1] not in ("+", "-"):
        raise ValueError("a rule starts with + (accept) or - (reject), then a regular expression")
    try:
        re.compile(rule[1:])
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc})") from exc
    return rule


def _check_param_pattern(pattern: str) -> str:
    if not pattern or any(c in pattern for c in "&=;/# \t"):
        raise ValueError("a parameter name or fnmatch glob (*, ?, [...]), without & = ; / # or spaces")
    return pattern


# Query parameters the normalizer removes by default: each only tracks a visit or carries a session,
# and a server answers the same page without it (why each is here: config.yaml).
DEFAULT_DROP_PARAMS = [
    "utm_*", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "_ga", "_gl", "srsltid", "fbclid", "msclkid",
    "twclid", "ttclid", "yclid", "igshid", "mc_cid", "mc_eid", "_hsenc", "_hsmi",
    "jsessionid", "phpsessid", "aspsessionid*", "sessionid", "cfid", "cftoken",
]


class UrlsConfig(Section):
    filters: list[Annotated[str, AfterValidator(_check_filter_rule)]] = []
    max_length: int = Field(2048, ge=1)
    max_segment_repeats: int = Field(3, ge=0)  # spider traps like /a/b/a/b/a/b/a/b/; 0 = no limit
    max_path_depth: int = Field(20, ge=0)  # path segments a URL may have (Heritrix's default); 0 = no limit
    schemes: list[str] = ["http", "https"]
    collapse_slashes: bool = True  # '/p//0.html' is '/p/0.html', as nginx and Apache serve it
    drop_params: list[Annotated[str, AfterValidator(_check_param_pattern)]] = DEFAULT_DROP_PARAMS


class TrapsConfig(Section):
    # Spider traps by content (crawler/jobs/traps.py): repeated pages are not followed, repeating folders not grown.
    skip_duplicate_outlinks: bool = True
    window: int = Field(200, ge=1)
    min_repeats: int = Field(10, ge=0)
    repeat_ratio: float = Field(0.8, ge=0.0, le=1.0)
    simhash_distance: int = Field(3, ge=0, le=15)


class LinkdbConfig(Section):
    max_inlinks: int = Field(10_000, ge=0)
    ignore_internal: bool = True
    bucket_rows: int = Field(2_000_000, ge=1)


class LogConfig(Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"
    file: str | None = None


class MetricsConfig(Section):
    listen: str = "127.0.0.1:9108"


class DaemonConfig(Section):
    seeds: str = "seeds"
    max_cycles: int = Field(0, ge=0)
    idle_sleep: Duration = 60.0
    keep_segments: int = Field(0, ge=0)
    archive_dir: str = ""
    shutdown_timeout: Duration = 30.0
    dedup_every: int = Field(10, ge=0)
    overlap: bool = True


class JobsConfig(Section):
    engine: Literal["duckdb", "spark"] = "duckdb"
    memory_limit: str = ""
    threads: int = Field(0, ge=0)
    temp_dir: str = ""


class SparkConfig(Section):
    # Read only when jobs.engine is spark (or fetch --spark): the cluster the jobs run on.
    master: str = "local[2]"
    conf: dict[str, str] = {}


# Built-in content type -> parser table (Nutch's parse-plugins.xml): parsers are tried in order
# until one succeeds; "*" catches every type no other key or pattern matches.
PARSE_PLUGINS: dict[str, list[str]] = {
    "text/html": ["html"],
    "application/xhtml+xml": ["html"],
    "text/plain": ["text"],
    "application/xml": ["sitemap", "feed"],
    "text/xml": ["sitemap", "feed"],
    "application/rss+xml": ["feed"],
    "application/atom+xml": ["feed"],
    "application/rdf+xml": ["feed"],
    "*": [],
}


def _merge_parse_plugins(value: dict[str, list[str]]) -> dict[str, list[str]]:
    # Listing one type (in config.yaml or with -D) replaces that entry only, so the built-ins stay.
    merged = dict(PARSE_PLUGINS)
    for pattern, names in value.items():
        key = pattern.strip().lower()
        if not key:
            raise ValueError("a MIME type or pattern cannot be empty")
        merged[key] = [name.strip() for name in names]
    return merged


class ParseConfig(Section):
    plugins: Annotated[dict[str, list[str]], AfterValidator(_merge_parse_plugins)] = PARSE_PLUGINS
    follow_nofollow_links: bool = False
    outlink_tags: list[Literal["a", "area", "frame", "iframe", "link"]] = ["a", "area", "frame", "iframe", "link"]
    # Navigational <link rel> types (HTML 4's and HTML's): documentation generators (Sphinx, DocBook,
    # Boostbook) link an index, a search page or a chapter only this way; stylesheets and icons are not pages.
    link_rels: list[str] = ["alternate", "next", "prev", "index", "contents", "search", "start", "first", "last", "up", "top", "home", "help", "glossary", "chapter", "section", "subsection", "appendix", "copyright"]
    gunzip_limit: Size = 50 * 1024 * 1024
    processes: int = Field(0, ge=0)


class SitemapConfig(Section):
    # URLs kept of one sitemap (or sitemap index) file; 0 = no cap. The parser reads at most the protocol's
    # 50000 entries of a file (crawler.parsers.sitemap.MAX_ENTRIES), so a higher cap would promise what it cannot.
    max_urls: int = Field(50_000, ge=0, le=50_000)


class StorageConfig(Section):
    # Read only when crawl_dir is s3://bucket/prefix (docs/scale-out.md, Storage); credentials come from the AWS env vars.
    endpoint: str = ""  # e.g. http://127.0.0.1:9000 for MinIO; empty = AWS_ENDPOINT_URL, else AWS itself
    region: str = ""  # empty = AWS_REGION / AWS_DEFAULT_REGION, else us-east-1
    staging_dir: str = ""  # local working copy of the remote crawl_dir; empty = ~/.cache/crawler/staging
    lease_ttl: Duration = Field(60.0, ge=5.0)  # a writer's lease on webdb/.lock lives this long unless renewed


class CrawlerConfig(Section):
    crawl_dir: Annotated[str, AfterValidator(check_crawl_dir)] = "."
    http: HttpConfig = HttpConfig()
    fetcher: FetcherConfig = FetcherConfig()
    robots: RobotsConfig = RobotsConfig()
    protocols: ProtocolsConfig = ProtocolsConfig()
    generate: GenerateConfig = GenerateConfig()
    db: DbConfig = DbConfig()
    urls: UrlsConfig = UrlsConfig()
    traps: TrapsConfig = TrapsConfig()
    linkdb: LinkdbConfig = LinkdbConfig()
    log: LogConfig = LogConfig()
    metrics: MetricsConfig = MetricsConfig()
    daemon: DaemonConfig = DaemonConfig()
    jobs: JobsConfig = JobsConfig()
    spark: SparkConfig = SparkConfig()
    parse: ParseConfig = ParseConfig()
    sitemap: SitemapConfig = SitemapConfig()
    storage: StorageConfig = StorageConfig()

    @property
    def crawl_path(self) -> Path:
        # A remote crawl_dir is worked in its local staging copy (crawler/storage/ pulls and publishes it).
        return local_crawl_path(self.crawl_dir, self.storage.staging_dir)


def _apply_override(tree: dict[str, Any], override: str) -> None:
    key, sep, raw = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"config error: -D {override!r}: expected dotted.key=value")
    try:
        value = _read_yaml(raw) if raw.strip() else ""
    except (yaml.YAMLError, ValueError):  # ValueError: an integer over Python's 4300-digit limit
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
    value = repr(first.get("input"))
    if len(value) > 80:  # one readable line, even for a 5000-digit number
        value = value[:77] + "..."
    reason = first["msg"].removeprefix("Value error, ")
    return f"config error ({source}): {path} = {value}: {reason}"


def _read_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, parsed by libyaml where it parses the same.

    In a fresh process the shipped config.yaml takes the pure-Python parser 30.5 ms of a command's start,
    libyaml 1.7 (medians of 9; 17 and 1.3 ms warm). The two build the same values from every document both
    accept; libyaml also takes some tabs the pure parser refuses, so a text with a tab, and a text libyaml
    refuses, go to the pure parser: it accepts or refuses them, with the error and line users always saw.
    """
    fast = getattr(yaml, "CSafeLoader", None)  # None: PyYAML built without libyaml
    if fast is not None and "\t" not in text:
        try:
            return yaml.load(text, Loader=fast)  # the safe loader, in C
        except (yaml.YAMLError, ValueError):  # ValueError: a 5000-digit int, or a lone surrogate
            pass
    return yaml.safe_load(text)


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
            loaded = _read_yaml(file.read_text(encoding="utf-8"))
        except (yaml.YAMLError, ValueError, OSError) as exc:  # ValueError: bad UTF-8, or a 5000-digit int
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


def plain(value: Any) -> Any:
    """The config (or a section of it) as plain values: SimpleNamespaces with its fields and properties, lists,
    dicts. What the parse processes and the part writer get instead of the models: unpickling a model loads
    pydantic and the config module, ~20 MB that each of those processes, and the fork server they are forked
    from, would hold (crawler/fetcher/parsepool.py)."""
    if isinstance(value, BaseModel):
        fields = {name: plain(getattr(value, name)) for name in type(value).model_fields}
        for klass in type(value).__mro__[:type(value).__mro__.index(BaseModel)]:  # our properties, not pydantic's
            for name, attr in vars(klass).items():
                if isinstance(attr, property) and name not in fields:
                    fields[name] = plain(getattr(value, name))
        return SimpleNamespace(**fields)
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
