"""The relational engine the batch jobs run on: DuckDB in-process, or Spark (``spark_engine.py``) behind the same SQL.

``JobEngine`` is what a job may call; ``open_engine`` gives the one ``jobs.engine`` names. The SQL
text the jobs share is built in ``sql.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from crawler.config import JobsConfig
from crawler.errors import ConfigError, StorageError
from crawler.fsutil import publish, remove_tree, temp_path_for
from crawler.jobs.sql import duck_type, sql_string

# Moved to sql.py; fetcher/known.py and daemon/outlook.py still import them from here.
from crawler.jobs.sql import sql_literal as sql_literal
from crawler.jobs.sql import utc_naive as utc_naive
from crawler.parquet_encoding import writer_options

_databases: dict[tuple[int, str, str], duckdb.DuckDBPyConnection] = {}
_databases_lock = threading.Lock()


def connect(cfg: JobsConfig) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection; all data stays in the Parquet files the jobs read and write.

    Each call gives a new connection (its own TEMP tables, closed by the job) to one in-memory
    database per process and settings: starting a database costs ~20 ms, a connection ~0.3 ms,
    and ``crawl`` runs three or four jobs a round.
    """
    key = (int(cfg.threads), cfg.memory_limit, cfg.temp_dir)
    with _databases_lock:
        database = _databases.get(key)
        if database is None:
            database = duckdb.connect(":memory:")
            if cfg.threads:
                database.execute(f"SET threads = {int(cfg.threads)}")
            if cfg.memory_limit:
                database.execute("SET memory_limit = ?", [cfg.memory_limit])
            if cfg.temp_dir:
                database.execute("SET temp_directory = ?", [cfg.temp_dir])
            database.execute("SET preserve_insertion_order = false")
            # Memory a job freed goes back to the system in the background (jemalloc's purge threads), not only
            # when a later allocation happens to reuse it: the database lives as long as the process, and after
            # updatedb's replay of a 22k-page round RSS stayed 364 MB for the rest of the crawl, 248 with this.
            database.execute("SET allocator_background_threads = true")
            # DuckDB draws its own bar on stdout after 2 s of a query: stdout is for results only.
            database.execute("SET enable_progress_bar = false")
            _databases[key] = database
        return database.cursor()


def flush_databases() -> None:
    """Hand the memory this process's finished jobs freed back to the system now.

    DuckDB returns it over about a second (jemalloc's purge threads), so it was still resident when
    ``crawl``'s next fetch started its parse pool: the fetch process at 320-350 MB instead of ~210 for
    the first half second, the crawl's summed peak in some runs (docs/benchmarks.md). DuckDB flushes its
    allocator (jemalloc's arenas, then ``malloc_trim``) when it closes a database and whenever it
    relaunches its worker threads (its task scheduler's ``RelaunchThreadsInternal``). A change of the
    thread count and back asks for the second: ~35 ms a round on the real-page bench, nearly all of it
    the unmapping itself, where closing the database and starting the next one cost ~50 ms. Should a
    DuckDB release stop flushing there, the memory still goes back as before, only later. Only while no
    job runs in this process (``crawl``: one step after another): a running query's threads would be
    stopped and relaunched under it.
    """
    with _databases_lock:
        for database in _databases.values():
            threads = int(database.execute("SELECT current_setting('threads')").fetchone()[0])
            database.execute(f"SET threads = {2 if threads == 1 else 1}")
            database.execute(f"SET threads = {threads}")


# --- Helpers shared by the jobs: typed Parquet sources and atomic Parquet output. ---


def part_batches(source: Any, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """``columns`` of one Parquet part (a path or an open file), 1000 rows a batch, decoded in this thread.

    Not on Arrow's thread pool: each of its threads keeps the pages its allocator used, so reading updatedb's
    parse_text there (22k pages) left 76 MB more resident, against 40 in one thread; the read is a tenth of the
    time of the simhashes computed from it.
    """
    return pq.ParquetFile(source).iter_batches(batch_size=1000, columns=columns, use_threads=False)


def parquet_source(files: list[Path] | list[str], schema: pa.Schema) -> str:
    """A parenthesised SELECT over ``files`` with exactly ``schema``'s columns; an empty typed one if none."""
    if not files:
        nulls = ", ".join(f"CAST(NULL AS {duck_type(f.type)}) AS {f.name}" for f in schema)
        return f"(SELECT {nulls} WHERE false)"
    listed = ", ".join(sql_string(str(f)) for f in files)
    present = _columns_in(files)
    # Columns added to a schema later (nullable, DESIGN 2) are NULL in parts written before. A column every part
    # holds with the schema's type is read as it is: DuckDB reads it as that type already, and each CAST is
    # planned again wherever the relation is used (a few in every job's statements).
    columns = ", ".join(
        f.name if present.get(f.name) == [f.type] * len(files) and _read_as_is(f.type)
        else f"CAST({f.name if f.name in present else 'NULL'} AS {duck_type(f.type)}) AS {f.name}"
        for f in schema
    )
    # Several parts may differ in their columns; one needs no union.
    by_name = ", union_by_name = true" if len(files) > 1 else ""
    return f"(SELECT {columns} FROM read_parquet([{listed}]{by_name}))"


def _read_as_is(dtype: pa.DataType) -> bool:
    """Whether DuckDB reads a Parquet column of ``dtype`` as ``duck_type(dtype)`` (not timestamps: those come as
    microseconds, and the schemas keep milliseconds)."""
    if pa.types.is_list(dtype):
        return _read_as_is(dtype.value_type)
    if pa.types.is_map(dtype):
        return _read_as_is(dtype.key_type) and _read_as_is(dtype.item_type)
    if pa.types.is_struct(dtype):
        return all(_read_as_is(f.type) for f in dtype)
    return dtype in (pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_())


def _columns_in(files: list[Path] | list[str]) -> dict[str, list[pa.DataType]]:
    """Each column name in ``files`` with its type in each file that has it."""
    types: dict[str, list[pa.DataType]] = {}
    for file in files:
        try:
            for field in pq.read_schema(file):
                types.setdefault(field.name, []).append(field.type)
        except (OSError, pa.ArrowException):
            continue  # unreadable: DuckDB's read then fails naming the file
    return types


def arrow_batches(con: duckdb.DuckDBPyConnection, query: str, batch: int = 100_000) -> pa.RecordBatchReader:
    """Stream the result of ``query`` as Arrow record batches (DuckDB 1.x and 2.x spell it differently)."""
    relation = con.sql(query)
    to_reader = getattr(relation, "to_arrow_reader", None) or relation.fetch_arrow_reader
    return to_reader(batch)


# Rows DuckDB hands pyarrow at a time, and rows a row group of the parts written holds. Handed 100,000 at a
# time, updatedb's links of a 36,890-page round (885k rows) took 90 MB above the job's other peaks while
# written, 25 at 20,000; written as row groups of 20,000, the jobs at 10M URLs spent 5-15 % more CPU (each
# group restarts its dictionaries; the readers pay per group). So DuckDB hands small batches and the writer
# gathers them into groups of the larger size (docs/benchmarks.md).
_FETCH_BATCH = 20_000
_ROW_GROUP = 100_000


def copy_to_parquet(con: duckdb.DuckDBPyConnection, query: str, dest: Path, schema: pa.Schema) -> int:
    """Write the rows of ``query`` to ``dest`` with exactly ``schema``, under a temp name renamed when complete.

    Written through pyarrow rather than DuckDB's COPY: COPY marks a column REQUIRED
    whenever it holds no NULL, and parts of one table must agree on the schema.
    Returns the number of rows written (an empty query still writes a file with the schema).
    """
    temp = temp_path_for(dest)
    rows = 0
    try:
        with pq.ParquetWriter(temp, schema, **writer_options(schema)) as writer:
            for group in _row_groups(arrow_batches(con, query, _FETCH_BATCH)):
                # Cast only when DuckDB's types differ: the first cast in a process costs ~40 ms
                # (pyarrow's compute functions load), and the jobs' typed SELECTs mostly match already.
                writer.write_table(group if group.schema.equals(schema) else group.cast(schema))
                rows += group.num_rows
        publish(temp, dest)
    except BaseException:
        remove_tree(temp)
        raise
    return rows


def _row_groups(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """``batches`` gathered into tables of at least ``_ROW_GROUP`` rows (the last one maybe fewer)."""
    gathered: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        gathered.append(batch)
        count += batch.num_rows
        if count >= _ROW_GROUP:
            yield pa.Table.from_batches(gathered)
            gathered, count = [], 0
    if gathered:
        yield pa.Table.from_batches(gathered)


def iter_dicts(cursor: duckdb.DuckDBPyConnection, batch: int = 10_000) -> Iterator[dict[str, Any]]:
    """The rows of an executed query as dicts, fetched ``batch`` at a time (memory stays flat)."""
    names = [d[0] for d in cursor.description]
    while rows := cursor.fetchmany(batch):
        for row in rows:
            yield dict(zip(names, row, strict=True))



class JobEngine(Protocol):
    """What a job may call on its engine: DuckEngine below and spark_engine.SparkEngine both provide it.

    A job writes its logic once, in DuckDB's dialect restricted to what the Spark
    translation (``spark_sql.py``) handles, and calls only these methods.
    """

    # The engine's own exceptions: a job turns them into one-line StorageErrors.
    errors: tuple[type[BaseException], ...]

    def source(self, files: list[Path] | list[str], schema: pa.Schema) -> str:
        """A relation (SQL text) over Parquet ``files`` with exactly ``schema``'s columns."""
        ...

    def register(self, name: str, table: pa.Table) -> None:
        """``table`` (in this process's memory) as a relation named ``name``."""
        ...

    def create_table(self, name: str, query: str) -> None:
        """Materialize ``query`` as table ``name`` for the job's later statements."""
        ...

    def stage(self, name: str, query: str, directory: Path) -> None:
        """Materialize ``query``, a large result later statements stream, as relation ``name``, out of memory where
        the engine can (in ``directory``, which the job removes)."""
        ...

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        """Every row of ``query`` (small results only: counts, a few figures)."""
        ...

    def count_rows(self, files: list[Path]) -> int:
        """Rows in Parquet ``files``, from their footers."""
        ...

    def batches(self, file: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """``columns`` of one Parquet part, in batches, read in this process (the few steps done in Python)."""
        ...

    def write(self, query: str, dest: Path, schema: pa.Schema, *, single: bool = True) -> int:
        """Rows of ``query`` (in order) published at ``dest`` with ``schema``; ``single``: one file, always."""
        ...

    def close(self) -> None: ...


# Rows a staged file's writer buffers per thread before it compresses them: DuckDB's default, 122,880, held
# ~40 MB more at the peak on updatedb's outlinks, for no time saved.
_STAGE_ROW_GROUP = 20_000


class DuckEngine:
    """Runs a job's SQL in-process with DuckDB (a JobEngine)."""

    errors: tuple[type[BaseException], ...] = (duckdb.Error,)

    def __init__(self, cfg: JobsConfig) -> None:
        self.con = connect(cfg)

    def source(self, files: list[Path] | list[str], schema: pa.Schema) -> str:
        """A relation (SQL text) over Parquet ``files`` with exactly ``schema``'s columns."""
        return parquet_source(files, schema)

    def register(self, name: str, table: pa.Table) -> None:
        self.con.register(name, table)

    def create_table(self, name: str, query: str) -> None:
        """Materialize ``query`` as table ``name`` for the job's later statements."""
        self.con.execute(f"CREATE TEMP TABLE {name} AS {query}")

    def stage(self, name: str, query: str, directory: Path) -> None:
        """``query`` written to a Parquet file in ``directory`` and read back as view ``name``.

        An in-memory table of nested lists costs DuckDB about twice its size while it is built, and holds it
        to the job's end: updatedb's kept outlinks of a 36,890-page round (885k) raised the process by 150 MB
        as a TEMP TABLE, against ~100 while written here in row groups of 20,000 rows, and nothing held after
        (docs/benchmarks.md). The file is scratch, read by this job alone: no temp name needed.
        """
        path = sql_string(str(directory / f"{name}.parquet"))
        self.con.execute(f"COPY ({query}) TO {path} (FORMAT parquet, ROW_GROUP_SIZE {_STAGE_ROW_GROUP})")
        self.con.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM read_parquet({path})")

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.con.execute(query).fetchall()]

    def count_rows(self, files: list[Path]) -> int:
        """Rows in Parquet ``files``, from their footers."""
        return sum(pq.read_metadata(f).num_rows for f in files)

    def batches(self, file: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """``columns`` of one Parquet part, in batches, read in this process (the few steps done in Python).

        Read by DuckDB, not pyarrow: the batches then take the memory DuckDB's allocator freed after the job's
        earlier statements, where pyarrow's threads took pages of their own on top of it (updatedb's texts of 22k
        pages: a peak 30-60 MB lower). 200 rows a batch: updatedb reads the texts in a thread while its statements
        run, so a batch's texts add to their peak (1000 rows of ~30 kB texts: the summed peak of a 4-round
        crawl ~25 MB higher, bench/realweb.py's web).
        """
        cursor = self.con.cursor()
        try:
            query = f"SELECT {', '.join(columns)} FROM read_parquet({sql_string(str(file))})"
            yield from arrow_batches(cursor, query, 200)
        finally:
            cursor.close()

    def write(self, query: str, dest: Path, schema: pa.Schema, *, single: bool = True) -> int:
        """Rows of ``query`` (in order) published at ``dest`` with ``schema``; ``single``: one file, always."""
        return copy_to_parquet(self.con, query, dest, schema)

    def close(self) -> None:
        self.con.close()


def open_engine(cfg: Any) -> JobEngine:
    """The engine ``cfg.jobs.engine`` names (``cfg``: the whole CrawlerConfig, Spark reads ``cfg.spark``)."""
    if cfg.jobs.engine == "spark":
        try:
            from crawler.jobs.spark_engine import SparkEngine  # pyspark is an optional dependency
        except ImportError as exc:
            raise ConfigError(f"jobs.engine is spark but {exc.name} is missing: pip install 'crawler[spark]'") from exc
        try:
            return SparkEngine(cfg)
        except Exception as exc:  # noqa: BLE001 - no JVM, bad master URL...: one line, not a Java trace
            raise StorageError(f"cannot start Spark (spark.master {cfg.spark.master}): {first_line(exc)}") from exc
    return DuckEngine(cfg.jobs)


def first_line(exc: BaseException) -> str:
    """An engine error as one line (Spark's carry a JVM stack trace)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
