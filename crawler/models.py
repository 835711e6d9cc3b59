"""The record schemas shared by the fetcher, the segment files and the jobs (the statuses: crawler/statuses.py).

The schemas are the on-disk contract (DESIGN section 2): DuckDB, Spark, pandas
and Polars read these Parquet columns directly, so change them only by adding
nullable columns.
"""

from __future__ import annotations

import pyarrow as pa

# Re-exported: most readers of the schemas also want the statuses.
from crawler.statuses import ROBOTS_SITEMAPS as ROBOTS_SITEMAPS
from crawler.statuses import DbStatus as DbStatus
from crawler.statuses import FetchStatus as FetchStatus
from crawler.statuses import ParseStatus as ParseStatus

TIMESTAMP = pa.timestamp("ms")  # naive, always UTC: reads the same in DuckDB, Spark and pandas

PAGES = pa.schema(
    [
        ("url", pa.string()),
        ("host", pa.string()),
        ("status", pa.string()),
        ("fetch_time", TIMESTAMP),
        ("next_fetch", TIMESTAMP),
        ("retries", pa.int32()),
        ("fetch_interval", pa.float64()),
        ("score", pa.float64()),
        ("digest", pa.string()),
        ("num_outlinks", pa.int32()),
        ("modified_time", TIMESTAMP),
        ("etag", pa.string()),
        ("http_status", pa.int32()),
        ("simhash", pa.int64()),  # 64-bit SimHash of the text (near-duplicates differ in few bits), crawler/jobs/traps.py
    ]
)

LINKS = pa.schema([("from_url", pa.string()), ("to_url", pa.string()), ("anchor", pa.string())])

# The link database's rows (crawler/jobs/invertlinks.py), sorted by to_url within each bucket.
INLINKS = pa.schema([("to_url", pa.string()), ("from_url", pa.string()), ("anchor", pa.string())])

FETCHLIST = pa.schema(
    [
        ("url", pa.string()),
        ("host", pa.string()),
        ("partition", pa.int32()),
        ("score", pa.float64()),
        ("db_status", pa.string()),
        ("retries", pa.int32()),
        ("fetch_time", TIMESTAMP),
        ("modified_time", TIMESTAMP),
        ("etag", pa.string()),
    ]
)

FETCHER = pa.schema(
    [
        ("url", pa.string()),
        ("host", pa.string()),
        ("status", pa.string()),
        ("http_status", pa.int32()),
        ("reason", pa.string()),
        ("fetch_time", TIMESTAMP),
        ("elapsed_ms", pa.int32()),
        ("content_type", pa.string()),
        ("content_length", pa.int64()),
        ("truncated", pa.bool_()),
        ("digest", pa.string()),
        ("redirect_url", pa.string()),
        ("last_modified", pa.string()),
        ("etag", pa.string()),
        ("redirect_source", pa.string()),  # the fetchlist URL whose redirect chain reached this one
        ("redirect_hop", pa.int32()),  # 1 for the first hop's target, ...; null for fetchlist entries
    ]
)

# The fetcher parts once updatesegs has written the databases' view back: the URL's score and its anchors.
FETCHER_UPDATED = FETCHER.append(pa.field("score", pa.float64())).append(pa.field("anchors", pa.list_(pa.string())))

OUTLINK = pa.struct([("url", pa.string()), ("anchor", pa.string())])

PARSE_TEXT = pa.schema([("url", pa.string()), ("text", pa.string())])

PARSE_DATA = pa.schema(
    [
        ("url", pa.string()),
        ("parse_status", pa.string()),
        ("title", pa.string()),
        ("outlinks", pa.list_(OUTLINK)),
        ("metadata", pa.map_(pa.string(), pa.string())),
    ]
)
