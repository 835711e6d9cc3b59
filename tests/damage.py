"""Where to damage a Parquet part so that a check can see it (tests/hostile/test_corruption.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def page_data_tail(path: Path) -> int:
    """An offset 6 bytes before the end of a Parquet part's largest column chunk: inside its last data page's
    compressed payload, which the page CRC covers. The middle of a small chunk can be its page header, whose
    statistics are bytes no check covers."""
    group = pq.ParquetFile(path).metadata.row_group(0)
    chunk = max((group.column(i) for i in range(group.num_columns)), key=lambda c: c.total_compressed_size)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    return start + chunk.total_compressed_size - 6
