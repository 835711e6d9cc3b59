"""copy_to_parquet writes exactly the given schema, whether DuckDB's result types match it or need a cast."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from crawler.config import CrawlerConfig
from crawler.jobs.engine import DuckEngine

SCHEMA = pa.schema([("url", pa.string()), ("n", pa.int32()), ("at", pa.timestamp("ms"))])


def test_matching_types_are_written_as_they_are(tmp_path):
    """A typed SELECT whose types are the schema's is written with the schema and its values."""
    engine = DuckEngine(CrawlerConfig().jobs)
    try:
        rows = engine.write("SELECT 'http://a/' AS url, CAST(3 AS INTEGER) AS n, TIMESTAMP_MS '2026-01-02 03:04:05' AS at",
                            tmp_path / "a.parquet", SCHEMA)
    finally:
        engine.close()
    table = pq.read_table(tmp_path / "a.parquet")
    assert rows == 1 and table.schema == SCHEMA
    assert table.to_pylist()[0]["n"] == 3 and str(table.to_pylist()[0]["at"]) == "2026-01-02 03:04:05"


def test_other_types_are_cast_to_the_schema(tmp_path):
    """A SELECT giving BIGINT and microsecond timestamps is cast to the schema's int32 and milliseconds."""
    engine = DuckEngine(CrawlerConfig().jobs)
    try:
        rows = engine.write("SELECT 'http://a/' AS url, 3 AS n, TIMESTAMP '2026-01-02 03:04:05' AS at FROM range(2)",
                            tmp_path / "b.parquet", SCHEMA)
    finally:
        engine.close()
    table = pq.read_table(tmp_path / "b.parquet")
    assert rows == 2 and table.schema == SCHEMA
    assert table.column("n").to_pylist() == [3, 3]
