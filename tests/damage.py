"""Damage a Parquet part where a check can see it (tests/hostile/test_corruption.py, tests/jobs/test_updatesegs.py)."""

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


def xor(path: Path, at: int, size: int) -> None:
    """Flip bits in ``size`` bytes of the file from offset ``at``."""
    data = bytearray(path.read_bytes())
    data[at : at + size] = bytes(b ^ 0x5A for b in data[at : at + size])
    path.write_bytes(bytes(data))


def garble_a_page(path: Path) -> None:
    """Garble the end of a Parquet part's largest column chunk, inside its last page's data: the page CRC
    catches it. A garbled footer or header that still parses escapes every check (crawler/segments/check.py)."""
    xor(path, page_data_tail(path), 4)
