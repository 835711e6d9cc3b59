"""parse_text parts written a slice of rows at a time read back as one table, equal to the rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from crawler.models import FETCHER, PARSE_TEXT
from crawler.segments.writer import write_parquet


def test_sliced_text_reads_back_whole(tmp_path):
    """Rows past ~2 M characters of text become a second row group; values, order and schema are unchanged."""
    rows = [{"url": f"http://a.example/{i}", "text": ch * 1_500_000} for i, ch in enumerate("abc")]
    rows.append({"url": "http://a.example/empty", "text": "caf\u00e9 \u2019"})
    path = tmp_path / "part-00000-00000.parquet"
    write_parquet(rows, PARSE_TEXT, path, slice_by="text")
    assert pq.read_table(path).to_pylist() == rows
    assert pq.read_schema(path) == PARSE_TEXT
    assert pq.ParquetFile(path).metadata.num_row_groups == 2


def test_no_rows_still_writes_a_readable_part(tmp_path):
    """An empty batch gives a part with the schema and no rows, sliced or not, as before slicing."""
    for name, slice_by, schema in (("t", "text", PARSE_TEXT), ("f", None, FETCHER)):
        path = tmp_path / f"{name}.parquet"
        write_parquet([], schema, path, slice_by=slice_by)
        expected = tmp_path / f"{name}-expected.parquet"
        pq.write_table(pa.Table.from_pylist([], schema=schema), expected, compression="zstd")
        assert pq.read_table(path).equals(pq.read_table(expected))
        assert pq.ParquetFile(path).metadata.num_row_groups == pq.ParquetFile(expected).metadata.num_row_groups
