"""Segments: one generate/fetch round on disk (fetchlist, fetcher, content, parse_text, parse_data)."""
