"""The DuckDB constructs sqlglot leaves untranslated compute the same values on Spark after spark_sql's fixes."""

from __future__ import annotations

import duckdb
import pytest

from crawler.config import CrawlerConfig
from crawler.jobs.generate import partition_sql
from crawler.jobs.spark_engine import SparkEngine
from crawler.segments.layout import partition_of
from crawler.urls.filters import filter_sql
from crawler.webdb.transitions import plus_seconds

from .conftest import spark_cfg

EXPRESSIONS = [
    # first occurrence of each element: a lambda's index counts from 1 in DuckDB, from 0 in Spark
    "list_filter(['a', 'b', 'a', 'c'], lambda o, i: list_position(['a', 'b', 'a', 'c'], o) = i)",
    "[10, 20, 30, 40][1:2]",
    "try_strptime('Sun, 06 Nov 1994 08:49:37 GMT', '%a, %d %b %Y %H:%M:%S GMT')",
    "try_strptime('yesterday', '%a, %d %b %Y %H:%M:%S GMT')",
    plus_seconds("TIMESTAMP '2026-01-01 00:00:00'", "86400.1234"),
    partition_sql("'www.example.com'", 7),
    filter_sql(CrawlerConfig().urls, "'http://a.example/x/y/x/y/x/y/x/'"),
    filter_sql(CrawlerConfig().urls, "'http://a.example/x/y/x/'"),
]


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_expression_has_the_same_value_on_both_engines(expression, tmp_path, spark):
    """One SQL expression, evaluated by DuckDB and by Spark after translation, gives one value."""
    query = f"SELECT {expression} AS v"
    engine = SparkEngine(spark_cfg(tmp_path))
    assert engine.rows(query) == duckdb.sql(query).fetchall()


def test_partition_sql_is_partition_of(tmp_path, spark):
    """The portable partition expression equals segments.layout.partition_of on Spark too."""
    engine = SparkEngine(spark_cfg(tmp_path))
    hosts = ["a.test", "www.example.com", "127.0.0.1", "xn--bcher-kva.example"]
    rows = engine.rows(" UNION ALL ".join(f"SELECT '{h}' AS h, {partition_sql(repr(h), 5)} AS p" for h in hosts))
    assert sorted(rows) == sorted((h, partition_of(h, 5)) for h in hosts)
