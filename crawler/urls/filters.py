"""URL filters: which normalized URLs the crawler keeps (``urls.*`` in config.yaml).

A URL is kept when its scheme is in ``urls.schemes``, it is at most
``urls.max_length`` characters long, no path segment occurs in it more than
``urls.max_segment_repeats`` times (the spider-trap rule of Nutch's default
regex-urlfilter, which needs a back-reference no SQL engine's RE2 has, so it is
a setting of its own), its path has at most ``urls.max_path_depth`` segments
(Heritrix's TooManyPathSegmentsDecideRule: endless relative links such as
``next/next/next/`` end there), and the ``urls.filters`` rules accept it.
The rules are ordered ``+regex`` (accept) / ``-regex`` (reject) lines; each
regex is searched anywhere in the URL and the first rule that matches decides.
As in Nutch's regex-urlfilter, a URL that no rule matches is rejected (end the
list with ``+.`` to accept the rest); an empty list accepts everything.

The same chain runs in two places. The fetcher calls ``UrlFilters.check`` on
each redirect hop; inject and updatedb apply ``filter_sql``, the chain rendered
as one SQL expression, to millions of URLs at once. DuckDB and Spark use RE2 /
Java regexes, so rules should keep to the syntax they share with Python's
``re`` (no look-around, no back-references); ``check_sql_patterns`` names a
rule the SQL engine cannot compile instead of failing mid-job.
"""

from __future__ import annotations

import re
from typing import Any

from crawler.config import UrlsConfig
from crawler.errors import ConfigError
from crawler.urls.normalize import host_of

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_PATH = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://[^/?#]*([^?#]*)")
_PATH_SQL = r"^[A-Za-z][A-Za-z0-9+.\-]*://[^/?#]*([^?#]*)"


def segment_repeats(url: str) -> int:
    """How often the most frequent non-empty path segment occurs ('/a/b/a/b/a/' -> 3; 0 without a path)."""
    m = _PATH.match(url)
    segments = [s for s in (m.group(1) if m else "").split("/") if s]
    return max((segments.count(s) for s in set(segments)), default=0)


def path_depth(url: str) -> int:
    """Non-empty path segments ('/a/b/c.html' -> 3, '/a//b/' -> 2, '/' -> 0); the query does not count."""
    m = _PATH.match(url)
    return sum(1 for s in (m.group(1) if m else "").split("/") if s)


class UrlFilters:
    """The configured filter chain; ``check`` answers None for a kept URL, else the reason."""

    def __init__(self, cfg: UrlsConfig, *, ignore_external: bool = False) -> None:
        self.schemes = frozenset(s.lower() for s in cfg.schemes)
        self.max_length = cfg.max_length
        self.max_repeats = cfg.max_segment_repeats
        self.max_depth = cfg.max_path_depth
        self.rules = [(rule[0] == "+", re.compile(rule[1:]), rule) for rule in cfg.filters]
        # Nutch's db.ignore.external.links also drops redirects that leave the source's host.
        self.ignore_external = ignore_external

    def check(self, url: str, source: str | None = None) -> str | None:
        """None if ``url`` (normalized) passes the filters; otherwise a short reason naming the setting."""
        m = _SCHEME.match(url)
        scheme = m.group(1).lower() if m else ""
        if scheme not in self.schemes:
            return f"scheme {scheme or '(none)'} not in urls.schemes"
        if len(url) > self.max_length:
            return f"longer than urls.max_length ({self.max_length})"
        if self.max_repeats and segment_repeats(url) > self.max_repeats:
            return f"a path segment repeats more than urls.max_segment_repeats ({self.max_repeats}) times"
        if self.max_depth and path_depth(url) > self.max_depth:
            return f"more path segments than urls.max_path_depth ({self.max_depth})"
        if self.ignore_external and source is not None and host_of(url) != host_of(source):
            return "external link (db.ignore_external_links)"
        if not self.rules:
            return None
        for number, (accept, pattern, rule) in enumerate(self.rules, start=1):
            if pattern.search(url):
                return None if accept else f"rejected by urls.filters rule {number} ({rule})"
        return "no urls.filters rule matches"


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def filter_sql(cfg: UrlsConfig, column: str) -> str:
    """A boolean SQL expression: true when the URL in ``column`` passes the chain (same answer as ``check``)."""
    # The scheme is the URL's start up to the first ":" when that is all scheme characters, so
    # comparing prefixes gives the regex's answer at a fraction of its cost (it runs per outlink).
    prefixes = sorted({s.lower() + ":" for s in cfg.schemes if _SCHEME.fullmatch(s + ":")})
    scheme = " OR ".join(f"lower(substr({column}, 1, {len(p)})) = {_literal(p)}" for p in prefixes) or "false"
    parts = [
        f"({scheme})",
        f"length({column}) <= {int(cfg.max_length)}",
    ]
    if cfg.max_segment_repeats:
        # The most frequent path segment's count: a histogram of the segments, no lambda needed.
        limit = int(cfg.max_segment_repeats)
        path = f"trim(regexp_extract({column}, {_literal(_PATH_SQL)}, 1), '/')"
        repeats = f"coalesce(list_max(map_values(list_aggregate(regexp_split_to_array({path}, '/+'), 'histogram'))), 0)"
        # The histogram costs ~10x the rest of the chain; a path has fewer segments than the URL has
        # slashes beyond "://", so a URL with at most limit + 2 slashes passes without it.
        few_slashes = f"{column} NOT LIKE '%{'/%' * (limit + 3)}'"
        parts.append(f"(CASE WHEN {few_slashes} THEN true ELSE ({path} = '' OR {repeats} <= {limit}) END)")
    if cfg.max_path_depth:
        parts.append(_depth_sql(column, int(cfg.max_path_depth)))
    if cfg.filters:
        whens = " ".join(
            f"WHEN regexp_matches({column}, {_literal(rule[1:])}) THEN {'true' if rule[0] == '+' else 'false'}"
            for rule in cfg.filters
        )
        parts.append(f"(CASE {whens} ELSE false END)")
    return "(" + " AND ".join(parts) + ")"


def _depth_sql(column: str, limit: int) -> str:
    # A path of k segments has at least k slashes, so a URL with at most limit + 2 slashes in all
    # ("://" has two) passes without splitting its path: nearly every URL, at the cost of one LIKE.
    path = f"regexp_extract({column}, {_literal(_PATH_SQL)}, 1)"
    segments = f"coalesce(array_length(list_filter(string_split({path}, '/'), lambda s: s <> '')), 0)"
    few_slashes = f"{column} NOT LIKE '%{'/%' * (limit + 3)}'"
    return f"(CASE WHEN {few_slashes} THEN true ELSE {segments} <= {limit} END)"


def check_sql_patterns(cfg: UrlsConfig, con: Any) -> None:
    """Raise ConfigError naming the first rule the SQL engine cannot compile.

    ``con``: a job engine (``jobs.engine``: DuckDB's RE2 and Spark's Java regexes differ) or a DuckDB connection.
    """
    run = getattr(con, "rows", None) or (lambda query: con.execute(query).fetchall())
    for number, rule in enumerate(cfg.filters, start=1):
        try:
            run(f"SELECT regexp_matches('', {_literal(rule[1:])})")
        except Exception as exc:  # noqa: BLE001 - any engine error means the same: unusable rule
            reason = str(exc).splitlines()[0]
            raise ConfigError(
                f"config error: urls.filters rule {number} ({rule}): the SQL engine cannot use it ({reason})"
            ) from exc
