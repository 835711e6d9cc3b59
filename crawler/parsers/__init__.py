"""Content parsers: turn fetched bytes into title, text, outlinks and metadata.

Each parser implements :class:`crawler.parsers.base.Parser` and is registered by
name in ``dispatch.PARSERS`` (html, text, sitemap, feed; third parties through
the ``crawler.parsers`` entry-point group); ``parse.plugins`` maps content types
to them. ``sniff`` checks the declared type against the bytes, ``encoding``
decodes text, ``reparse`` re-parses a stored segment (``crawler parse``).
"""
