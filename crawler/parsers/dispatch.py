"""Choose parsers by content type (``parse.plugins``), after checking the type against the bytes.

The table maps a MIME type, or a pattern such as ``text/*``, to parser names
tried in order until one succeeds (a sitemap parser declines a feed, and the
feed parser after it takes it); ``*`` catches every other type. An exact type
beats a pattern, a longer pattern beats a shorter one. gzip bodies
(sitemap.xml.gz) are unpacked and dispatched on what they contain.
``X-Robots-Tag`` applies to whatever the parser found.

A ParserDispatch holds only plain data built from the config, so it can be
pickled into a process pool.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from zlib_ng import zlib_ng

from crawler.errors import ConfigError
from crawler.parsers.base import Parser, ParseResult
from crawler.parsers.directives import header_values, robot_names, x_robots_tag
from crawler.parsers.sniff import GENERIC, GZIP, effective_type, mime_of
from crawler.plugins import Registry

if TYPE_CHECKING:  # the parse side runs on the config's values, not its models (crawler/fetcher/parsepool.py)
    from crawler.config import CrawlerConfig

__all__ = ["PARSERS", "ParserDispatch", "mime_of"]

# Each target is a factory taking the CrawlerConfig and returning a Parser.
PARSERS = Registry(
    "crawler.parsers",
    {
        "html": "crawler.parsers.html:create",
        "text": "crawler.parsers.text:create",
        "sitemap": "crawler.parsers.sitemap:create",
        "feed": "crawler.parsers.feed:create",
    },
)

Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def gunzip(body: bytes, limit: int) -> tuple[bytes, bool] | None:
    """(content, truncated) of a gzip body, never more than ``limit`` bytes; None when corrupt."""
    try:
        inflater = zlib_ng.decompressobj(16 + zlib_ng.MAX_WBITS)  # as the fetcher inflates bodies
        out = inflater.decompress(body, limit + 1)
    except zlib_ng.error:
        return None
    if not out and not inflater.eof:  # a header and nothing after it: no content to speak of
        return None
    return out[:limit], len(out) > limit or bool(inflater.unconsumed_tail)


class ParserDispatch:
    def __init__(self, cfg: CrawlerConfig) -> None:
        table = cfg.parse.plugins
        for pattern, names in table.items():
            for name in names:
                if name not in PARSERS:
                    raise ConfigError(
                        f"config error: parse.plugins.{pattern}: unknown parser {name!r} "
                        f"(known: {', '.join(PARSERS.names())})"
                    )
        self._exact = {k: list(v) for k, v in table.items() if "*" not in k}
        self._patterns = sorted(
            ((k, list(v)) for k, v in table.items() if "*" in k and k != "*"), key=lambda kv: -len(kv[0])
        )
        self._fallback = list(table.get("*", []))
        used = {name for names in table.values() for name in names}
        self._parsers: dict[str, Parser] = {name: PARSERS.load(name)(cfg) for name in sorted(used)}
        self._robot_names = robot_names(cfg.http.agent_name)
        self._gunzip_limit = cfg.parse.gunzip_limit

    def parsers_for(self, mime: str) -> list[str]:
        """Parser names for a bare MIME type, in the order they are tried."""
        if mime in self._exact:
            return self._exact[mime]
        for pattern, names in self._patterns:
            if fnmatch.fnmatchcase(mime, pattern):
                return names
        return self._fallback

    def parse(
        self, body: bytes, url: str, content_type: str | None, *, headers: Headers | None = None
    ) -> ParseResult:
        """Parse a response body; never raises. ``headers`` (for X-Robots-Tag) may be a mapping or pairs."""
        try:
            res = self._dispatch(body, url, content_type, nested=False)
        except Exception as exc:  # a parser plugin's bug must not stop the fetch of other pages
            res = ParseResult(status="failed", reason=f"{type(exc).__name__}: {exc}")
        if values := header_values(headers, "X-Robots-Tag"):
            noindex, nofollow = x_robots_tag(values, self._robot_names)
            res.noindex = res.noindex or noindex
            if nofollow:
                res.nofollow, res.outlinks = True, []
        return res

    def _dispatch(self, body: bytes, url: str, content_type: str | None, nested: bool) -> ParseResult:
        declared = mime_of(content_type)
        mime = effective_type(declared, body)
        if mime == GZIP and not nested:
            unpacked = gunzip(body, self._gunzip_limit)
            if unpacked is None:
                return ParseResult(
                    status="failed", reason="corrupt gzip content", metadata={"content_type": mime}
                )
            inner, truncated = unpacked
            # A specific declared type (application/xml for a .xml.gz) still describes the content.
            res = self._dispatch(
                inner, url, None if declared in GENERIC or "gzip" in declared else content_type, True
            )
            res.metadata["gunzipped"] = "true"
            if truncated:
                res.metadata["gunzip_truncated"] = "true"
            return res
        names = self.parsers_for(mime)
        served = f" (served as {declared})" if declared and declared != mime else ""
        if not names:
            res = ParseResult(status="unparsed", reason=f"no parser for {mime}{served}")
        else:
            results = []
            for name in names:
                res = self._parsers[name].parse(body, url, content_type)
                if res.status == "success":
                    break
                results.append(res)
            else:  # none succeeded: a parser's failure says more than another one declining
                res = next((r for r in results if r.status == "failed"), results[-1])
        res.metadata["content_type"] = mime
        if served:
            res.metadata["declared_content_type"] = declared
        return res
