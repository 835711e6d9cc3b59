"""The webdb status machine: what one fetch result does to a page (DESIGN 6a), as one table.

updatedb applies it to millions of pages at once, so the table is not run row by
row in Python: ``render_sql`` turns it into one SQL ``CASE`` expression per page
column, which DuckDB (and later Spark) evaluates over the joined Parquet data.

Reading a row: a page whose latest fetch ended with *fetch status* (and, for
``retry``, whose retry count is still within / beyond ``db.max_retries``) gets
the *webdb status*; its ``digest`` is the fetched one or the old one; its
conditional-refetch validators (``modified_time``, ``etag``) are the fetched
ones, the fetched ones falling back to the old, or the old ones; it is due again
*next fetch* after the fetch time; its ``retries`` counter is reset, or counts
this failure too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from crawler.config import DbConfig
from crawler.statuses import DbStatus, FetchStatus


class When(StrEnum):
    ALWAYS = "always"
    RETRIES_LEFT = "retries + 1 <= db.max_retries"
    RETRIES_EXHAUSTED = "retries + 1 > db.max_retries"


class Take(StrEnum):
    """Where a value comes from: this fetch, this fetch else the old page, or the old page."""

    NEW = "new"
    NEW_ELSE_OLD = "new, else old"
    OLD = "old"


class After(StrEnum):
    """The interval added to the fetch time to get ``next_fetch``."""

    PAGE_INTERVAL = "the page's fetch_interval"
    RETRY_INTERVAL = "db.retry_interval"
    MAX_INTERVAL = "db.max_interval"


class Retries(StrEnum):
    RESET = "0"
    COUNT = "retries + 1"


@dataclass(frozen=True, slots=True)
class Rule:
    fetch: FetchStatus
    when: When
    status: DbStatus
    digest: Take
    validators: Take
    next_fetch: After
    retries: Retries


F, D = FetchStatus, DbStatus
ALWAYS, LEFT, EXHAUSTED = When.ALWAYS, When.RETRIES_LEFT, When.RETRIES_EXHAUSTED
NEW, NEW_ELSE_OLD, OLD = Take.NEW, Take.NEW_ELSE_OLD, Take.OLD
PAGE, RETRY, MAX = After.PAGE_INTERVAL, After.RETRY_INTERVAL, After.MAX_INTERVAL
RESET, COUNT = Retries.RESET, Retries.COUNT

# fmt: off
TABLE: tuple[Rule, ...] = (
    #    fetch status       when       webdb status      digest  validators     next fetch  retries
    Rule(F.SUCCESS,         ALWAYS,    D.FETCHED,        NEW,    NEW,           PAGE,       RESET),
    Rule(F.NOTMODIFIED,     ALWAYS,    D.NOTMODIFIED,    OLD,    NEW_ELSE_OLD,  PAGE,       RESET),
    Rule(F.REDIRECT_PERM,   ALWAYS,    D.REDIRECT_PERM,  NEW,    NEW,           PAGE,       RESET),
    Rule(F.REDIRECT_TEMP,   ALWAYS,    D.REDIRECT_TEMP,  NEW,    NEW,           PAGE,       RESET),
    Rule(F.GONE,            ALWAYS,    D.GONE,           OLD,    OLD,           MAX,        RESET),
    Rule(F.ROBOTS_DENIED,   ALWAYS,    D.GONE,           OLD,    OLD,           MAX,        RESET),
    Rule(F.RETRY,           LEFT,      D.RETRY,          OLD,    OLD,           RETRY,      COUNT),
    Rule(F.RETRY,           EXHAUSTED, D.GONE,           OLD,    OLD,           MAX,        COUNT),
    Rule(F.FAILED,          ALWAYS,    D.GONE,           OLD,    OLD,           MAX,        RESET),
)
# fmt: on


def rule_for(fetch: str, retries: int, max_retries: int) -> Rule | None:
    """The row that applies to one page (None for a status the fetcher should never write)."""
    for rule in TABLE:
        if rule.fetch != fetch:
            continue
        if rule.when == LEFT and retries + 1 > max_retries:
            continue
        if rule.when == EXHAUSTED and retries + 1 <= max_retries:
            continue
        return rule
    return None


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def plus_seconds(timestamp_sql: str, seconds_sql: str) -> str:
    """SQL for a timestamp plus a number of seconds (kept to the millisecond)."""
    return f"({timestamp_sql} + to_milliseconds(CAST(round(({seconds_sql}) * 1000) AS BIGINT)))"


def render_sql(
    db: DbConfig, fetched: str = "f", page: str = "p", page_interval: str | None = None
) -> dict[str, str]:
    """One SQL ``CASE`` per page column the table decides, keyed by column name.

    ``fetched`` names the relation with the fetch record (status, fetch_time,
    digest, modified_time parsed from Last-Modified, etag); ``page`` the page as
    it was (status, retries, fetch_interval, digest, modified_time, etag,
    next_fetch). ``page_interval`` is SQL for the page's interval after this
    fetch (the schedule's answer; default: unchanged). A fetch status outside
    the table leaves the old value.
    """
    f, p = fetched, page
    conditions = {
        ALWAYS: "",
        LEFT: f" AND {p}.retries + 1 <= {int(db.max_retries)}",
        EXHAUSTED: f" AND {p}.retries + 1 > {int(db.max_retries)}",
    }
    intervals = {
        PAGE: page_interval or f"{p}.fetch_interval",
        RETRY: repr(float(db.retry_interval)),
        MAX: repr(float(db.max_interval)),
    }

    def take(how: Take, column: str) -> str:
        return {
            NEW: f"{f}.{column}",
            NEW_ELSE_OLD: f"coalesce({f}.{column}, {p}.{column})",
            OLD: f"{p}.{column}",
        }[how]

    values = {
        "status": lambda r: _literal(r.status),
        "digest": lambda r: take(r.digest, "digest"),
        "modified_time": lambda r: take(r.validators, "modified_time"),
        "etag": lambda r: take(r.validators, "etag"),
        "next_fetch": lambda r: plus_seconds(f"{f}.fetch_time", intervals[r.next_fetch]),
        "retries": lambda r: "0" if r.retries == RESET else f"{p}.retries + 1",
    }
    columns = {}
    for column, value in values.items():
        # The rules are disjoint (one fetch status each, retry's split by its count), so one WHEN per distinct
        # value gives the same CASE as one per rule, and rules that keep the old value fall to the ELSE:
        # a third of the branches, and updatedb's pages statement is planned in that much less time.
        kept = f"{p}.{column}"
        grouped: dict[str, list[Rule]] = {}
        for r in TABLE:
            if value(r) != kept:
                grouped.setdefault(value(r), []).append(r)
        whens = " ".join(f"WHEN {_matches(rules, f, conditions)} THEN {v}" for v, rules in grouped.items())
        columns[column] = f"CASE {whens} ELSE {kept} END" if whens else kept
    return columns


def _matches(rules: list[Rule], f: str, conditions: dict[When, str]) -> str:
    """SQL true when the fetch record ``f`` falls under one of ``rules``."""
    always = [r.fetch for r in rules if r.when == ALWAYS]
    terms = []
    if always:
        terms.append(f"{f}.status IN ({', '.join(_literal(s) for s in always)})")
    terms += [f"({f}.status = {_literal(r.fetch)}{conditions[r.when]})" for r in rules if r.when != ALWAYS]
    return terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")"
