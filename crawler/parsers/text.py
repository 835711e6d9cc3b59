"""Plain text: decoded, whitespace collapsed, no title and no outlinks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawler.parsers.base import ParseResult
from crawler.parsers.encoding import decode
from crawler.parsers.html import collapse_ws

if TYPE_CHECKING:  # the parse side runs on the config's values, not its models (crawler/fetcher/parsepool.py)
    from crawler.config import CrawlerConfig


class TextParser:
    """Parser for text/plain (and any type mapped to ``text``); never raises on bad input."""

    def parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        try:
            text, charset, source = decode(body, content_type)
        except Exception as exc:  # one bad body must never take down a parse worker
            return ParseResult(status="failed", reason=f"{type(exc).__name__}: {exc}")
        return ParseResult(
            status="success", text=collapse_ws(text), metadata={"charset": charset, "charset_source": source}
        )


def create(cfg: CrawlerConfig) -> TextParser:
    return TextParser()
