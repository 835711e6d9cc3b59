"""copy_to_parquet writes exactly the given schema, whether DuckDB's result types match it or need a cast."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crawler.config import CrawlerConfig
from crawler.jobs.engine import DuckEngine

SCHEMA = pa.schema([("url", pa.string()), ("n", pa.int32()), ("at", pa.timestamp("ms"))])


@pytest.mark.parametrize(("select", "rows"), [
    # the schema's own types: written as they are
    ("SELECT 'http://a/' AS url, CAST(3 AS INTEGER) AS n, TIMESTAMP_MS '2026-01-02 03:04:05' AS at", 1),
    # BIGINT and microsecond timestamps: cast to int32 and milliseconds
    ("SELECT 'http://a/' AS url, 3 AS n, TIMESTAMP '2026-01-02 03:04:05' AS at FROM range(2)", 2),
])
def test_written_with_the_schema_whatever_duckdb_gives(tmp_path, select, rows):
    """A SELECT with the schema's types, or with wider ones, is written with exactly the schema and its values."""
    engine = DuckEngine(CrawlerConfig().jobs)
    try:
        written = engine.write(select, tmp_path / "a.parquet", SCHEMA)
    finally:
        engine.close()
    table = pq.read_table(tmp_path / "a.parquet")
    assert written == rows and table.schema == SCHEMA
    assert table.column("n").to_pylist() == [3] * rows
    assert {str(t) for t in table.column("at").to_pylist()} == {"2026-01-02 03:04:05"}
