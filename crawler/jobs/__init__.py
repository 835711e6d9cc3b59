"""Batch jobs over the crawl database and segments, as DuckDB SQL over Parquet."""
