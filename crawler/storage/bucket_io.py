"""The Spark engine's bucket I/O: sources and sinks on the bucket itself, for jobs over an ``s3://`` reference tree.

In the reference tree (crawler/storage/references.py) each Parquet part the
job sees is a reference naming an object. Reading: the driver turns the list of
keys into a DataFrame with one row per file and one Spark partition per file,
and a ``mapInArrow`` opens each file with ``pyarrow.fs`` on the executor and
yields its record batches conformed to the job's schema (columns missing in
old parts as NULL, as the local reader does). Writing: each Spark partition
writes one part into this process's scratch prefix, and the driver leaves a
reference at the job's destination; the session's publish places it.

``mapInArrow`` rather than PySpark's Python Data Source API: the reader is
one generator over keys, works the same in ``local[N]`` and on a standalone
cluster, and needs no data source registered in each job's session.

The executors get what they need in the task closure (``BucketAccess``: the
bucket, the endpoint and region of ``storage``, and the driver's credentials
as boto3 resolves them), so an executor host needs no AWS configuration.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from crawler.crawldir import Remote, parse_remote
from crawler.errors import StorageError
from crawler.storage.bucket import filesystem_options
from crawler.storage.credentials import driver_credentials
from crawler.storage.references import is_reference_tree, read_reference, scratch_prefix

_BATCH_ROWS = 65_536
_writes = itertools.count()


@dataclass(frozen=True)
class BucketAccess:
    """Everything an executor needs to open the bucket; pickled into each task."""

    bucket: str
    # pyarrow.fs.S3FileSystem arguments; out of repr, so a task or log line that prints one shows no secret
    options: dict[str, Any] = field(default_factory=dict, repr=False)

    def filesystem(self) -> fs.S3FileSystem:
        return fs.S3FileSystem(**self.options)

    def path(self, key: str) -> str:
        return f"{self.bucket}/{key}"


def bucket_access(remote: Remote, storage: Any) -> BucketAccess:
    """The bucket of ``remote`` with the endpoint, region and credentials this driver uses.

    Without credentials on the driver the executors use their own chain (an instance profile on cluster nodes).
    """
    return BucketAccess(remote.bucket, filesystem_options(storage, driver_credentials(storage)))


class BucketIO:
    """The Spark engine's reads and writes when the job runs in a reference tree (None otherwise: local files)."""

    def __init__(self, remote: Remote, access: BucketAccess) -> None:
        self.remote = remote
        self.access = access
        self.scratch = scratch_prefix(remote)
        self._fs: fs.S3FileSystem | None = None

    @classmethod
    def for_config(cls, cfg: Any) -> BucketIO | None:
        remote = parse_remote(cfg.crawl_dir)
        if remote is None or not is_reference_tree(cfg.crawl_path):
            return None
        return cls(remote, bucket_access(remote, cfg.storage))

    @property
    def filesystem(self) -> fs.S3FileSystem:
        if self._fs is None:
            self._fs = self.access.filesystem()
        return self._fs

    def key_of(self, file: Path | str) -> str:
        key = read_reference(file)
        if key is None:
            raise StorageError(f"{file}: not a reference to a part in {self.remote.url}; the reference tree holds "
                               "nothing else (delete the file and run the command again)")
        return key

    def count_rows(self, files: list[Path]) -> int:
        """Rows of the referenced parts, from their footers (a few KB each through the driver)."""
        total = 0
        for file in files:
            key = self.key_of(file)
            try:
                with self.filesystem.open_input_file(self.access.path(key)) as handle:
                    total += pq.read_metadata(handle).num_rows
            except (OSError, pa.ArrowException) as exc:
                raise StorageError(f"{self.remote.scheme}://{self.access.path(key)}: {exc}") from exc
        return total

    @contextmanager
    def open(self, file: Path) -> Iterator[Any]:
        """The part ``file`` refers to, opened for reading through the driver."""
        with self.filesystem.open_input_file(self.access.path(self.key_of(file))) as handle:
            yield handle

    def read(self, spark: Any, files: list[Path] | list[str], spark_schema: Any) -> Any:
        """A DataFrame of the referenced parts with exactly ``spark_schema``: one Spark partition per part."""
        from pyspark.sql.pandas.types import to_arrow_schema

        keys = [self.key_of(f) for f in files]
        rows = spark.sparkContext.parallelize([(k,) for k in keys], len(keys))
        reader = part_reader(self.access, to_arrow_schema(spark_schema))
        return spark.createDataFrame(rows, "key STRING").mapInArrow(reader, spark_schema)

    def write_folder(self, dest: Path) -> str:
        """The scratch prefix one write's parts go to (part-<partition>.parquet below it)."""
        return f"{self.scratch}/{next(_writes):05d}-{dest.name}"

    def write_empty(self, key: str, schema: pa.Schema) -> None:
        with self.filesystem.open_output_stream(self.access.path(key)) as sink:
            pq.write_table(schema.empty_table(), sink)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with exactly ``schema``'s columns, in order: absent ones NULL, present ones cast."""
    names = set(batch.schema.names)
    columns = [batch.column(f.name).cast(f.type) if f.name in names else pa.nulls(batch.num_rows, f.type)
               for f in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def part_reader(access: BucketAccess, schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executor side of a read: each input row names a part; yield its rows with ``schema``."""

    def read(keys: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        filesystem = access.filesystem()
        for batch in keys:
            for key in batch.column(0).to_pylist():
                with filesystem.open_input_file(access.path(key)) as handle:
                    for part_batch in pq.ParquetFile(handle).iter_batches(batch_size=_BATCH_ROWS):
                        yield conform(part_batch, schema)

    return read
