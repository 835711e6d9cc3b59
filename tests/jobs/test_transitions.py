from __future__ import annotations

from datetime import datetime, timedelta

import duckdb
import pytest

from crawler.config import DbConfig
from crawler.models import FetchStatus
from crawler.webdb.transitions import TABLE, render_sql, rule_for

DB = DbConfig(fetch_interval=1000, max_interval=90_000, retry_interval=500, max_retries=2)
FETCHED_AT = datetime(2026, 3, 1, 12, 0, 0)
OLD = {"digest": "old", "modified_time": datetime(2020, 1, 1), "etag": "old-etag"}
NEW = {"digest": "new", "modified_time": datetime(2026, 2, 1), "etag": "new-etag"}


def apply(fetch_status: str, retries: int, new: dict | None = None) -> dict:
    """Evaluate the rendered SQL for one page fetched once."""
    new = NEW if new is None else new
    con = duckdb.connect()
    con.execute(
        """CREATE TABLE p AS SELECT 'fetched' AS status, ?::INTEGER AS retries, 2000.0::DOUBLE AS fetch_interval,
           ?::VARCHAR AS digest, ?::TIMESTAMP AS modified_time, ?::VARCHAR AS etag,
           TIMESTAMP '2000-01-01' AS next_fetch""",
        [retries, OLD["digest"], OLD["modified_time"], OLD["etag"]],
    )
    con.execute(
        """CREATE TABLE f AS SELECT ?::VARCHAR AS status, ?::TIMESTAMP AS fetch_time, ?::VARCHAR AS digest,
           ?::TIMESTAMP AS modified_time, ?::VARCHAR AS etag""",
        [fetch_status, FETCHED_AT, new["digest"], new["modified_time"], new["etag"]],
    )
    columns = render_sql(DB)
    select = ", ".join(f"{sql} AS {name}" for name, sql in columns.items())
    cursor = con.execute(f"SELECT {select} FROM f, p")
    names = [d[0] for d in cursor.description]
    return dict(zip(names, cursor.fetchall()[0], strict=True))


def test_every_fetch_status_has_a_rule():
    """Each status the fetcher can write appears in the table, and retry has both retry and gone rows."""
    assert {r.fetch for r in TABLE} == set(FetchStatus)
    assert {r.status for r in TABLE if r.fetch == FetchStatus.RETRY} == {"retry", "gone"}


# fetch status, retries before -> webdb status, retries after, next fetch after (s), digest, validators
CASES = [
    ("success", 1, "fetched", 0, 2000, "new", "new"),
    ("notmodified", 1, "notmodified", 0, 2000, "old", "new"),
    ("redirect_perm", 0, "redirect_perm", 0, 2000, "new", "new"),
    ("redirect_temp", 0, "redirect_temp", 0, 2000, "new", "new"),
    ("gone", 1, "gone", 0, 90_000, "old", "old"),
    ("robots_denied", 0, "gone", 0, 90_000, "old", "old"),
    ("failed", 1, "gone", 0, 90_000, "old", "old"),
    ("retry", 0, "retry", 1, 500, "old", "old"),
    ("retry", 1, "retry", 2, 500, "old", "old"),
    ("retry", 2, "gone", 3, 90_000, "old", "old"),
]


@pytest.mark.parametrize(
    ("fetch_status", "retries", "status", "retries_after", "after", "digest", "validators"), CASES
)
def test_transition(fetch_status, retries, status, retries_after, after, digest, validators):
    """A fetch result moves the page to the status, retry count, next fetch and digest of DESIGN 6a."""
    row = apply(fetch_status, retries)
    assert row["status"] == status
    assert row["retries"] == retries_after
    assert row["next_fetch"] == FETCHED_AT + timedelta(seconds=after)
    assert row["digest"] == {"new": NEW, "old": OLD}[digest]["digest"]
    source = {"new": NEW, "old": OLD}[validators]
    assert (row["modified_time"], row["etag"]) == (source["modified_time"], source["etag"])
    rule = rule_for(fetch_status, retries, DB.max_retries)
    assert rule is not None and rule.status == status


def test_notmodified_without_validators_keeps_the_old_ones():
    """A 304 that repeats no Last-Modified or ETag keeps the validators the page had."""
    row = apply("notmodified", 0, {"digest": None, "modified_time": None, "etag": None})
    assert (row["digest"], row["modified_time"], row["etag"]) == (
        OLD["digest"],
        OLD["modified_time"],
        OLD["etag"],
    )


def test_unknown_fetch_status_changes_nothing():
    """A fetch status outside the table leaves every decided column as it was."""
    row = apply("bogus", 1)
    assert row == {
        "status": "fetched",
        "digest": "old",
        "modified_time": OLD["modified_time"],
        "etag": "old-etag",
        "next_fetch": datetime(2000, 1, 1),
        "retries": 1,
    }
    assert rule_for("bogus", 1, DB.max_retries) is None
