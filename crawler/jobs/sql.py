"""SQL text the jobs share: literals, types, the host of a URL, and the relations over segment outputs.

Every job writes its SQL once, in DuckDB's dialect restricted to what the Spark translation
(``spark_sql.py``) handles; these helpers build the pieces more than one job needs, so that the
jobs import this module (and ``engine.py``) rather than each other.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from crawler.models import PARSE_DATA, ROBOTS_SITEMAPS
from crawler.parsers.base import SITEMAP_KINDS
from crawler.segments.layout import Segment
from crawler.urls.normalize import HOST_PATTERN

if TYPE_CHECKING:
    from crawler.jobs.engine import JobEngine


def sql_string(value: str) -> str:
    """Quote a path or literal for SQL text (DuckDB cannot take file globs as parameters everywhere)."""
    return "'" + value.replace("'", "''") + "'"


def md5_prefix_sql(digest: str, digits: int, modulus: int | None = None) -> str:
    """SQL for the first ``digits`` hex digits of an MD5 hex string, as an integer (optionally mod ``modulus``).

    A sum of each digit times its place value, with functions every engine has (no unsigned 64-bit
    type, no hex parsing). With a ``modulus`` each place value is taken mod it: the sum stays below
    256 times the modulus (no overflow for 16 digits), and the digits whose place value is a
    multiple of it drop out (all but the last for a power of two up to 16: one partition, none). A
    flat sum rather than Horner's nesting: every function call in a statement costs DuckDB time to
    plan, and generate plans this once per run over a few pages.
    """
    terms = []
    for k in range(1, digits + 1):
        weight = 16 ** (digits - k) if modulus is None else 16 ** (digits - k) % int(modulus)
        if weight:
            digit = f"(instr('0123456789abcdef', substr({digest}, {k}, 1)) - 1)"
            terms.append(digit if weight == 1 else f"{digit} * {weight}")
    value = " + ".join(terms) or "0"
    if modulus is not None and terms:
        value = f"({value}) % {int(modulus)}"
    return f"CAST({value} AS INTEGER)"


def sql_literal(value: Any) -> str:
    """A Python value as an SQL literal both engines read (the jobs inline their few parameters)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP '{utc_naive(value).isoformat(sep=' ', timespec='milliseconds')}'"
    return sql_string(str(value))


def utc_naive(moment: datetime | None) -> datetime:
    """``moment`` (default: now) as the naive-UTC datetime the schemas store, truncated to milliseconds."""
    moment = moment or datetime.now(UTC)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def iso_sql(column: str) -> str:
    """SQL rendering a timestamp column as the JSON time format (``2026-11-29T19:45:00Z``) or NULL."""
    return f"strftime({column}, '%Y-%m-%dT%H:%M:%SZ')"


_SCALAR_TYPES = {
    pa.string(): "VARCHAR",
    pa.timestamp("ms"): "TIMESTAMP_MS",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
}


def duck_type(dtype: pa.DataType) -> str:
    """The DuckDB type that writes back to Parquet as ``dtype`` (models.py schemas only)."""
    if dtype in _SCALAR_TYPES:
        return _SCALAR_TYPES[dtype]
    if pa.types.is_map(dtype):
        return f"MAP({duck_type(dtype.key_type)}, {duck_type(dtype.item_type)})"
    if pa.types.is_list(dtype):
        return duck_type(dtype.value_type) + "[]"
    if pa.types.is_struct(dtype):
        fields = ", ".join(f"{f.name} {duck_type(f.type)}" for f in dtype)
        return f"STRUCT({fields})"
    raise TypeError(f"no DuckDB type for {dtype}")


def typed_columns(schema: pa.Schema, prefix: str = "") -> str:
    """``CAST(col AS T) AS col, ...`` for every field of ``schema``, in schema order."""
    return ", ".join(f"CAST({prefix}{f.name} AS {duck_type(f.type)}) AS {f.name}" for f in schema)


def first_of_each_sql(items: str, targets: str) -> str:
    """SQL for the list ``items`` (structs with a ``url``) keeping each URL's first element, in order;
    ``targets`` is the list of their URLs.

    The parsers list each target once, so a list with no repeat (a hash of its URLs, O(n)) is kept as it
    is. Only a list with repeats pays for list_position, which scans the list for every element: 3.6 s
    for one 50,000-URL sitemap, 0.02 s for its repeat check.
    """
    return (f"CASE WHEN array_length(list_distinct({targets})) = array_length({targets}) THEN {items} "
            f"ELSE list_filter({items}, lambda o, i: list_position({targets}, o.url) = i) END")


def host_sql(url: str) -> str:
    """SQL for the host of a normalized URL, as crawler.urls.normalize.host_of computes it."""
    return f"regexp_extract({url}, {sql_string(HOST_PATTERN)}, 1)"


def host_differs_sql(url: str, host: str) -> str:
    """SQL true when ``host_sql(url)`` is not ``host`` (a host_sql value), mostly without running the regex.

    The regex is most of the cost of a per-outlink host test. Exactly the same answer: the host is
    a substring of the URL, so a URL not containing ``host`` has another; one with no "@" (no
    userinfo) starting "http://" or "https://" has host ``host`` exactly when ``host`` follows and
    then "/", ":" or the end (the regex stops the host there; a host it gives has none of "/", ":",
    "@" unless bracketed, and bracketed hosts take the regex).
    """
    def follows(start: int) -> str:
        return (f"NOT (substr({url}, {start}, length({host})) = {host}"
                f" AND substr({url}, {start} + length({host}), 1) IN ('/', ':', ''))")
    return f"""(CASE WHEN NOT contains({url}, {host}) THEN true
        WHEN contains({url}, '@') OR starts_with({host}, '[') THEN {host_sql(url)} <> {host}
        WHEN starts_with({url}, 'http://') THEN {follows(8)}
        WHEN starts_with({url}, 'https://') THEN {follows(9)}
        ELSE {host_sql(url)} <> {host} END)"""


def segment_source(con: JobEngine, segments: list[Segment], output: str, schema: Any) -> str:
    """All parts of ``output`` in ``segments`` as one relation with a ``segment`` column."""
    selects = [
        f"SELECT {sql_string(seg.name)} AS segment, * FROM {con.source(seg.parts(output), schema)}"
        for seg in segments
    ]
    return "(" + " UNION ALL ".join(selects) + ")"


def parse_data_source(con: JobEngine, segments: list[Segment]) -> str:
    """The url and outlinks of each page parsed in ``segments``, one row per (segment, url), with a ``segment`` column,
    ``is_sitemap`` (the sitemap parser read it) and ``robots_sitemaps`` (how many of the last outlinks the fetcher
    appended from robots.txt Sitemap: lines, ``records.add_robots_sitemaps``).

    A resumed fetch can leave a URL parsed twice in one segment, so the rows are made unique;
    the window that does it carries every outlink list through a sort (40% of the parse step at
    1M pages), so it runs only when a cheap count over the URLs finds a duplicate.
    """
    source = segment_source(con, segments, "parse_data", PARSE_DATA)
    duplicated = con.rows(f"""SELECT count(*) FROM (
        SELECT segment, url FROM {source} d GROUP BY segment, url HAVING count(*) > 1) dups""")[0][0]
    # A missing key is NULL on both engines with `metadata[key]` (Spark's element_at raises under ANSI).
    robots = f"TRY_CAST(metadata[{sql_string(ROBOTS_SITEMAPS)}] AS INTEGER)"
    columns = f"""segment, url, outlinks,
        coalesce(metadata['sitemap'] IN {tuple(SITEMAP_KINDS)!r}, false) AS is_sitemap,
        least(greatest(coalesce({robots}, 0), 0), coalesce(array_length(outlinks), 0)) AS robots_sitemaps"""
    if not duplicated:
        return f"(SELECT {columns} FROM {source} d)"
    return f"""(SELECT {columns} FROM (
        SELECT segment, url, outlinks, metadata, row_number() OVER (PARTITION BY segment, url ORDER BY url) AS rn
        FROM {source} d) ranked WHERE rn = 1)"""
