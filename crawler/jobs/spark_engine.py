"""The batch jobs on Apache Spark (``jobs.engine: spark``): the same SQL, transpiled, over the same Parquet layout.

A SparkEngine is a JobEngine (``engine.py``), as DuckEngine is: Parquet sources
become temp views read with the job's exact schema (columns missing in old parts
read as NULL, as DuckDB's ``union_by_name``), the job's SQL runs through
``spark_sql.to_spark``, intermediate tables are local checkpoints, and output
is written by the executors with pyarrow (``mapInArrow``): each Spark partition
writes one part with exactly the models.py schema into a temporary folder next
to the destination, and the driver then renames the parts into place in
partition order, so the sort order and the atomic publish hold as with DuckDB.
The temporary folder must be on storage the executors and the driver share
(local disk in local mode; a shared mount on a cluster, see docs/scale-out.md).
Over an ``s3://`` crawl_dir's reference tree there is no shared folder: the
executors read and write the bucket (crawler/storage/bucket_io.py) and the driver keeps
references, so the same jobs run on a cluster that shares nothing but the bucket.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JError
from pyspark import TaskContext
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from sqlglot.errors import SqlglotError

from crawler.fsutil import TEMP_PREFIX, publish, remove_tree
from crawler.jobs.engine import part_batches
from crawler.jobs.spark_sql import to_spark
from crawler.parquet_encoding import writer_options
from crawler.segments.layout import part_name
from crawler.storage.bucket_io import BucketAccess, BucketIO
from crawler.storage.references import write_reference

_lock = threading.Lock()
_names = itertools.count()

# Local mode stays on loopback and quiet; a user's spark.conf overrides any of these.
_LOCAL_DEFAULTS = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
}
# Plan rules that make the jobs' per-page list SQL quadratic: CollapseProject inlines a derived
# column (the filtered outlinks) into the lambda that reads it, so the URL filter runs once per
# element pair instead of once per element, and InferFiltersFromGenerate evaluates the whole
# list expression again as a filter before each unnest. Without them updatedb's outlink step is
# ~8x faster (docs/scale-out.md); results do not change (optimizer rules only rewrite plans).
_EXCLUDED_RULES = ",".join(
    f"org.apache.spark.sql.catalyst.optimizer.{rule}" for rule in ("CollapseProject", "InferFiltersFromGenerate")
)
_DEFAULTS = {
    "spark.ui.showConsoleProgress": "false",  # the bar would land between results on the terminal
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",  # the schemas store naive UTC times
    "spark.pyspark.python": sys.executable,  # executors run our writer with the same packages
    "spark.sql.optimizer.excludedRules": _EXCLUDED_RULES,
    "spark.sql.adaptive.enabled": "true",  # merges small shuffle partitions after each stage
    "spark.sql.execution.arrow.pyspark.enabled": "true",  # register(): Arrow tables in without row objects
}


def local_cores(master: str) -> int | None:
    """N of ``local[N]`` (``local``: 1, ``local[*]``: this machine's cores); None for a cluster master."""
    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if not found:
        return None
    if found.group(1) is None:
        return 1
    return os.cpu_count() or 1 if found.group(1) == "*" else int(found.group(1))


def spark_session(cfg: Any) -> SparkSession:
    """The process's SparkSession for ``cfg.spark`` (created on first use, then shared)."""
    with _lock:
        # Python workers must run this interpreter (our packages); a local JVM binds loopback only.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        if cfg.spark.master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.master(cfg.spark.master).appName("crawler")
        settings = dict(_DEFAULTS)
        cores = local_cores(cfg.spark.master)
        if cores is not None:
            # One shuffle partition per core: Spark's 200 would make hundreds of tiny tasks.
            settings.update(_LOCAL_DEFAULTS, **{"spark.sql.shuffle.partitions": str(cores)})
        settings.update(cfg.spark.conf)
        for key, value in settings.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()


def spark_type(dtype: pa.DataType) -> T.DataType:
    """The Spark type of a models.py column type."""
    scalars = {
        pa.string(): T.StringType(), pa.int32(): T.IntegerType(), pa.int64(): T.LongType(),
        pa.float64(): T.DoubleType(), pa.bool_(): T.BooleanType(),
    }
    if dtype in scalars:
        return scalars[dtype]
    if pa.types.is_timestamp(dtype):
        return T.TimestampNTZType()
    if pa.types.is_map(dtype):
        return T.MapType(spark_type(dtype.key_type), spark_type(dtype.item_type))
    if pa.types.is_list(dtype):
        return T.ArrayType(spark_type(dtype.value_type))
    if pa.types.is_struct(dtype):
        return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in dtype])
    raise TypeError(f"no Spark type for {dtype}")


def spark_schema(schema: pa.Schema) -> T.StructType:
    return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in schema])


_WRITTEN = pa.schema([("part", pa.int32()), ("rows", pa.int64())])


def _part_writer(
    folder: str, schema: pa.Schema, bucket: BucketAccess | None = None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executor side: write one Spark partition's rows as ``folder/part-<partition>.parquet``.

    ``folder`` is a local path, or with ``bucket`` a key prefix there (the object appears when closed).
    """

    options = writer_options(schema)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition = TaskContext.get().partitionId()
        path = f"{folder}/{part_name(partition)}"
        rows, writer, sink = 0, None, None
        for batch in batches:
            if batch.num_rows:
                if writer is None:
                    sink = bucket.filesystem().open_output_stream(bucket.path(path)) if bucket else None
                    writer = pq.ParquetWriter(sink or path, schema, **options)
                writer.write_table(pa.Table.from_batches([batch]).cast(schema))
                rows += batch.num_rows
        if writer is not None:
            writer.close()
            if sink is not None:
                sink.close()
            yield pa.RecordBatch.from_pydict({"part": [partition], "rows": [rows]}, schema=_WRITTEN)

    return write


class SparkEngine:
    """Runs a job's SQL on Spark (``spark.master``); one new session per job keeps its views apart."""

    errors: tuple[type[BaseException], ...] = (PySparkException, Py4JError, SqlglotError)

    def __init__(self, cfg: Any) -> None:
        self.spark = spark_session(cfg).newSession()
        self._cached: list[DataFrame] = []
        # Over an s3:// crawl_dir's reference tree the executors read and write the bucket (storage/bucket_io.py).
        self.bucket = BucketIO.for_config(cfg)

    def source(self, files: list[Path] | list[str], schema: pa.Schema) -> str:
        name = f"source_{next(_names)}"
        if files and self.bucket is not None:
            frame = self.bucket.read(self.spark, files, spark_schema(schema))
        elif files:
            frame = self.spark.read.schema(spark_schema(schema)).parquet(*[str(f) for f in files])
        else:
            frame = self.spark.createDataFrame([], spark_schema(schema))
        frame.createOrReplaceTempView(name)
        return name

    def register(self, name: str, table: pa.Table) -> None:
        self.spark.createDataFrame(table, spark_schema(table.schema)).createOrReplaceTempView(name)

    def create_table(self, name: str, query: str) -> None:
        # Materialized once, as DuckDB's TEMP TABLE: later statements read it several times.
        frame = self.spark.sql(to_spark(query)).localCheckpoint(eager=True)
        self._cached.append(frame)
        frame.createOrReplaceTempView(name)

    def stage(self, name: str, query: str, directory: Path) -> None:
        # Spark's checkpoint already keeps what outgrows the executors' memory on their disks.
        self.create_table(name, query)

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(to_spark(query)).collect()]

    def count_rows(self, files: list[Path]) -> int:
        if self.bucket is not None:
            return self.bucket.count_rows(files)
        return sum(pq.read_metadata(f).num_rows for f in files)

    def batches(self, file: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """``columns`` of one part, in batches, read by the driver (from the bucket in a reference tree)."""
        if self.bucket is not None:
            with self.bucket.open(file) as handle:
                yield from part_batches(handle, columns)
        else:
            yield from part_batches(file, columns)

    def write(self, query: str, dest: Path, schema: pa.Schema, *, single: bool = True) -> int:
        """Parts of ``query`` in order: ``dest``, then ``<dest stem>-00001.parquet``...; ``single``: one file."""
        frame = self.spark.sql(to_spark(query))
        if single:
            frame = frame.coalesce(1)  # keeps a sorted result's order: partitions are concatenated
        if self.bucket is not None:
            return self._write_to_bucket(self.bucket, frame, dest, schema)
        temp = dest.parent / f"{TEMP_PREFIX}{dest.name}.parts.{os.getpid()}"
        temp.mkdir()
        try:
            written = sorted(frame.mapInArrow(_part_writer(str(temp), schema), "part INT, rows BIGINT").collect())
            if not written:  # an empty result still leaves a file with the schema, as DuckEngine does
                pq.write_table(schema.empty_table(), temp / part_name(0))
                written = [(0, 0)]
            for n, (part, _) in enumerate(written):
                name = dest.name if n == 0 else f"{dest.stem}-{n:05d}{dest.suffix}"
                publish(temp / part_name(part), dest.parent / name)
        finally:
            remove_tree(temp)
        return sum(rows for _, rows in written)

    @staticmethod
    def _write_to_bucket(bucket: BucketIO, frame: DataFrame, dest: Path, schema: pa.Schema) -> int:
        """As ``write``, with the parts in the bucket's scratch prefix and references to them at ``dest``..."""
        folder = bucket.write_folder(dest)
        written = sorted(frame.mapInArrow(_part_writer(folder, schema, bucket.access), "part INT, rows BIGINT").collect())
        if not written:
            bucket.write_empty(f"{folder}/{part_name(0)}", schema)
            written = [(0, 0)]
        for n, (part, _) in enumerate(written):
            name = dest.name if n == 0 else f"{dest.stem}-{n:05d}{dest.suffix}"
            write_reference(dest.parent / name, f"{folder}/{part_name(part)}")
        return sum(rows for _, rows in written)

    def close(self) -> None:
        for frame in self._cached:
            frame.unpersist()
        self._cached.clear()
