"""Choose a parser by content type; sniff the bytes when the header is missing or generic."""

from __future__ import annotations

from crawler.config import CrawlerConfig
from crawler.parsers.base import Parser, ParseResult
from crawler.plugins import Registry

PARSERS = Registry("crawler.parsers", {"html": "crawler.parsers.html:HtmlParser"})

# MIME type -> parser name; a "*" entry would be the fallback for every other type.
DEFAULT_TYPES = {"text/html": "html", "application/xhtml+xml": "html"}

_GENERIC = {"", "application/octet-stream", "text/plain", "binary/octet-stream"}
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<title")


def sniff(body: bytes) -> str | None:
    head = body[:512].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(_HTML_STARTS):
        return "text/html"
    return None


def mime_of(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


class ParserDispatch:
    def __init__(self, cfg: CrawlerConfig, types: dict[str, str] | None = None) -> None:
        self.types = dict(types or DEFAULT_TYPES)
        self._parsers: dict[str, Parser] = {
            name: PARSERS.load(name)(agent_name=cfg.http.agent_name) for name in set(self.types.values())
        }

    def parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult:
        mime = mime_of(content_type)
        if mime in _GENERIC:
            mime = sniff(body) or mime
        name = self.types.get(mime) or self.types.get("*")
        if name is None:
            return ParseResult(status="unparsed", reason=f"no parser for {mime or 'unknown type'}")
        return self._parsers[name].parse(body, url, content_type)
