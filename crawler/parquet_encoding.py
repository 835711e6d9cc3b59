"""How each table's columns are encoded in Parquet: which get a dictionary, which min/max statistics,
and which tables carry page checksums.

pyarrow's writer, left to itself, tries a dictionary for every column and keeps min/max statistics for
every column. Two of those choices cost CPU for nothing on some tables:

- a column whose values are nearly all distinct in a row group (a page's URL, its digest, a page's text)
  fills the dictionary's 1 MB page and is then written plain all the same: the hashing was wasted;
- a string column in no order gets statistics that let no reader skip a row group (every row group's
  range spans nearly the whole alphabet), yet the writer compares every value to keep them.

The jobs' writers (crawler/jobs/engine.py, spark_engine.py) and the segments' (crawler/segments/writer.py)
take these options. At 10M URLs (bench/bench_webdb.py) the jobs' writer runs on the job's thread while DuckDB
computes the next rows, so its CPU is the steps' wall: updatedb's pages and links cost ~25 % less to encode
this way (docs/benchmarks.md). A column keeps its dictionary where real crawls repeat values in it: outlink
targets (navigation links), hosts, statuses. Tables not listed here are written with pyarrow's defaults.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from crawler.models import FETCHER, FETCHER_UPDATED, INLINKS, LINKS, PAGES, PARSE_DATA, PARSE_TEXT

# Per table: the columns written without a dictionary, and those written without statistics.
_PLAIN: dict[pa.Schema, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # In no order (updatedb does not sort them); score and simhash are floats and hashes that rarely repeat.
    PAGES: (("url", "digest", "score", "simhash"), ("url", "digest", "etag")),
    # In no order either. to_url keeps its dictionary: a site's pages link the same pages in each row group.
    LINKS: ((), ("from_url", "to_url", "anchor")),
    # Sorted by to_url in each bucket: its statistics let a lookup by URL (readlinkdb --url) skip row groups.
    INLINKS: ((), ("from_url", "anchor")),
    # Page texts never repeat: a dictionary page would be built and thrown away (~5 us a row). No reader
    # selects by a range of texts, yet their statistics copied up to 4 kB of page text into every page
    # header and the footer, where a garbled byte escapes the page checksum (crawler/segments/check.py).
    PARSE_TEXT: (("url", "text"), ("url", "text")),
}


# A segment's parts are kept, archived and read back long after the crawl: each data page carries a CRC32,
# which `readseg --list` verifies (crawler/segments/check.py). A garbled page would otherwise decode to other
# text without an error, as zstd keeps no checksum of its own here. Its cost is below measure (~1 % of
# writing parse_text). The webdb's versions are rebuilt by each updatedb and go without.
_CHECKSUMMED = (FETCHER, FETCHER_UPDATED, PARSE_DATA, PARSE_TEXT)


def writer_options(schema: pa.Schema) -> dict[str, Any]:
    """Keyword arguments for ``pyarrow.parquet.ParquetWriter`` writing a table of ``schema``."""
    options: dict[str, Any] = {"write_page_checksum": True} if schema in _CHECKSUMMED else {}
    if (plain := _PLAIN.get(schema)) is not None:
        no_dictionary, no_statistics = plain
        options["use_dictionary"] = [name for name in schema.names if name not in no_dictionary]
        options["write_statistics"] = [name for name in schema.names if name not in no_statistics]
    return options
