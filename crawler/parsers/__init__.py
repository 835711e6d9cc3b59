"""Content parsers: turn fetched bytes into title, text, outlinks and metadata.

Each parser implements :class:`crawler.parsers.base.Parser`; the fetcher picks one by
content type and runs it off the event loop (parsing is CPU work).
"""
