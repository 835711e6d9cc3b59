"""first_of_each_sql: each URL's first element of an outlink list, in order, with or without repeats."""

from __future__ import annotations

import duckdb
import pytest

from crawler.jobs.sql import first_of_each_sql


def _links(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"url": url, "anchor": anchor} for url, anchor in pairs]


@pytest.mark.parametrize(("links", "kept"), [
    (None, None),
    ([], []),
    (_links(("a", "1"), ("b", "2")), _links(("a", "1"), ("b", "2"))),  # no repeat: the list as it is
    (_links(("a", "1"), ("b", "2"), ("a", "3"), ("c", "4"), ("b", "5")), _links(("a", "1"), ("b", "2"), ("c", "4"))),
    (_links(("x", "1"), ("x", "2"), ("x", "3")), _links(("x", "1"))),
])
def test_each_url_keeps_its_first_element_in_order(links, kept):
    con = duckdb.connect()
    con.execute("CREATE TABLE t (l STRUCT(url VARCHAR, anchor VARCHAR)[])")
    con.execute("INSERT INTO t VALUES (?)", [links])
    got = con.execute(f"""SELECT {first_of_each_sql('l', 'targets')}
                          FROM (SELECT l, list_transform(l, lambda y: y.url) AS targets FROM t)""").fetchone()[0]
    assert got == kept
