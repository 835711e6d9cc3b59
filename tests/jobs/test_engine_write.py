"""copy_to_parquet writes exactly the given schema, whether DuckDB's result types match it or need a cast, and each
table's columns encoded as crawler/parquet_encoding.py declares."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crawler.config import CrawlerConfig
from crawler.jobs.engine import DuckEngine
from crawler.jobs.sql import typed_columns
from crawler.models import INLINKS, LINKS, PAGES

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


def _chunks(path) -> dict[str, pq.ColumnChunkMetaData]:
    group = pq.ParquetFile(path).metadata.row_group(0)
    return {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}


def _dictionary(chunk: pq.ColumnChunkMetaData) -> bool:
    return "RLE_DICTIONARY" in chunk.encodings or "PLAIN_DICTIONARY" in chunk.encodings


def _min_max(chunk: pq.ColumnChunkMetaData) -> bool:
    return chunk.statistics is not None and chunk.statistics.has_min_max


def test_tables_encoded_as_encodings_declares(tmp_path):
    """Distinct columns are written plain, unordered strings without min/max; the rest with pyarrow's defaults."""
    given = {"url": "'http://h/' || i", "host": "'h'", "status": "'fetched'", "fetch_time": "TIMESTAMP_MS '2026-01-02'",
             "score": "0.5 + i", "digest": "md5(i::VARCHAR)"}
    columns = ", ".join(f"{given.get(name, 'NULL')} AS {name}" for name in PAGES.names)
    pages = f"SELECT {columns} FROM range(50) t(i)"
    links = "SELECT 'http://h/' || (i // 10) AS from_url, 'http://h/nav' || (i % 3) AS to_url, 'a' AS anchor FROM range(50) t(i)"
    inlinks = "SELECT 'http://h/' || (i // 10) AS to_url, 'http://h/' || i AS from_url, 'a' AS anchor FROM range(50) t(i)"
    engine = DuckEngine(CrawlerConfig().jobs)
    try:
        engine.write(f"SELECT {typed_columns(PAGES)} FROM ({pages}) p",
                     tmp_path / "pages.parquet", PAGES)
        engine.write(links, tmp_path / "links.parquet", LINKS)
        engine.write(f"{inlinks} ORDER BY to_url", tmp_path / "inlinks.parquet", INLINKS)
        engine.write("SELECT 'http://h/' || i AS url, i AS n, NULL AS at FROM range(5) t(i)", tmp_path / "other.parquet", SCHEMA)
    finally:
        engine.close()
    page = _chunks(tmp_path / "pages.parquet")
    assert not _dictionary(page["url"]) and not _dictionary(page["digest"]) and not _dictionary(page["score"])
    assert not _min_max(page["url"]) and not _min_max(page["digest"])
    assert _dictionary(page["host"]) and _dictionary(page["status"])
    assert _min_max(page["host"]) and _min_max(page["fetch_time"]) and _min_max(page["score"])
    link = _chunks(tmp_path / "links.parquet")
    assert _dictionary(link["to_url"]) and _dictionary(link["from_url"])
    assert not any(_min_max(chunk) for chunk in link.values())
    inlink = _chunks(tmp_path / "inlinks.parquet")
    assert _min_max(inlink["to_url"]) and inlink["to_url"].statistics.min == "http://h/0"
    assert not _min_max(inlink["from_url"]) and not _min_max(inlink["anchor"])
    other = _chunks(tmp_path / "other.parquet")
    assert _dictionary(other["url"]) and _min_max(other["url"])
    assert pq.read_table(tmp_path / "pages.parquet").column("url").to_pylist()[:2] == ["http://h/0", "http://h/1"]
