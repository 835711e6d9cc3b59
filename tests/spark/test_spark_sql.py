"""The DuckDB constructs sqlglot leaves untranslated compute the same values on Spark after spark_sql's fixes."""

from __future__ import annotations

import duckdb
import pytest

from crawler.config import CrawlerConfig
from crawler.jobs.generate import partition_sql
from crawler.jobs.spark_engine import SparkEngine, local_cores
from crawler.jobs.spark_sql import to_spark
from crawler.segments.layout import partition_of
from crawler.urls.filters import filter_sql
from crawler.webdb.transitions import plus_seconds

from .conftest import spark_cfg

EXPRESSIONS = [
    # first occurrence of each element: a lambda's index counts from 1 in DuckDB, from 0 in Spark
    "list_filter(['a', 'b', 'a', 'c'], lambda o, i: list_position(['a', 'b', 'a', 'c'], o) = i)",
    "[10, 20, 30, 40][1:2]",
    "[10, 20, 30, 40][4 - 2 + 1:4]",  # a compound start: the slice's length is end - (start) + 1
    "[10, 20, 30, 40][1:4 - 4]",  # empty
    "TRY_CAST(map(['a'], ['1'])['b'] AS INTEGER)",  # a missing key is NULL under Spark's ANSI mode too
    "TRY_CAST(map(['a'], ['x'])['a'] AS INTEGER)",
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


@pytest.mark.parametrize(("master", "cores"), [("local", 1), ("local[3]", 3), ("local[2, 4]", 2), ("spark://h:7077", None)])
def test_local_cores_reads_the_master(master, cores):
    """local[N] gives N cores (and N shuffle partitions by default); a cluster master gives None."""
    assert local_cores(master) == cores


def test_local_session_has_one_shuffle_partition_per_core(spark):
    """The test session (local[2]) runs 2 shuffle partitions, not Spark's 200, and keeps the quadratic-plan rules off."""
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert "CollapseProject" in spark.conf.get("spark.sql.optimizer.excludedRules")


def test_a_filtered_list_is_filtered_once_per_row(tmp_path, spark):
    """A list filtered in one step and deduplicated by position in the next keeps one copy of the filter in the plan."""
    engine = SparkEngine(spark_cfg(tmp_path))
    engine.spark.sql(
        "SELECT 'p' AS url, array(named_struct('url', 'a'), named_struct('url', 'a'), named_struct('url', 'b')) AS outlinks"
    ).createOrReplaceTempView("pages")
    # The shape of updatedb's and invertlinks' outlink selection; the marker stands for the URL filter.
    query = """SELECT url, list_filter(l, lambda o, i: list_position(targets, o.url) = i) AS l
        FROM (SELECT *, list_transform(l, lambda y: y.url) AS targets FROM (
            SELECT url, list_filter(outlinks, lambda o: o.url <> 'marker-7f3a') AS l FROM pages) kept) with_targets"""
    frame = engine.spark.sql(to_spark(query))
    assert frame._jdf.queryExecution().optimizedPlan().toString().count("marker-7f3a") == 1
    assert [r.url for r in frame.collect()[0].l] == ["a", "b"]
