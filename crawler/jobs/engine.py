"""The relational engine the batch jobs run on (DuckDB in-process; Spark later behind the same SQL)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from crawler.config import JobsConfig
from crawler.fsutil import publish, remove_tree, temp_path_for


def connect(cfg: JobsConfig) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection; all data stays in the Parquet files the jobs read and write."""
    con = duckdb.connect(":memory:")
    if cfg.threads:
        con.execute(f"SET threads = {int(cfg.threads)}")
    if cfg.memory_limit:
        con.execute("SET memory_limit = ?", [cfg.memory_limit])
    con.execute("SET preserve_insertion_order = false")
    return con


def sql_string(value: str) -> str:
    """Quote a path or literal for SQL text (DuckDB cannot take file globs as parameters everywhere)."""
    return "'" + value.replace("'", "''") + "'"


# --- Helpers shared by the jobs: typed Parquet sources and atomic Parquet output. ---

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


def parquet_source(files: list[Path] | list[str], schema: pa.Schema) -> str:
    """A parenthesised SELECT over ``files`` with exactly ``schema``'s columns; an empty typed one if none."""
    if not files:
        nulls = ", ".join(f"CAST(NULL AS {duck_type(f.type)}) AS {f.name}" for f in schema)
        return f"(SELECT {nulls} WHERE false)"
    listed = ", ".join(sql_string(str(f)) for f in files)
    return f"(SELECT {typed_columns(schema)} FROM read_parquet([{listed}], union_by_name = true))"


def copy_to_parquet(con: duckdb.DuckDBPyConnection, query: str, dest: Path) -> int:
    """Run ``query`` and write its rows to ``dest`` under a temp name, renamed when complete; rows written."""
    temp = temp_path_for(dest)
    try:
        row = con.execute(f"COPY ({query}) TO {sql_string(str(temp))} (FORMAT parquet)").fetchone()
        publish(temp, dest)
    except BaseException:
        remove_tree(temp)
        raise
    return int(row[0]) if row else 0


def utc_naive(moment: datetime | None) -> datetime:
    """``moment`` (default: now) as the naive-UTC datetime the schemas store, truncated to milliseconds."""
    moment = moment or datetime.now(UTC)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def iso_sql(column: str) -> str:
    """SQL rendering a timestamp column as the JSON time format (``2026-11-29T19:45:00Z``) or NULL."""
    return f"strftime({column}, '%Y-%m-%dT%H:%M:%SZ')"
