"""The contract between the fetcher and content parsers."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Outlink:
    url: str
    anchor: str


@dataclass(slots=True)
class ParseResult:
    status: str  # "success" | "failed" | "unparsed", as written to parse_data
    title: str = ""
    text: str = ""
    outlinks: list[Outlink] = field(default_factory=list)
    noindex: bool = False
    nofollow: bool = False
    canonical: str | None = None
    refresh: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)  # charset, description, keywords, lang, ...
    reason: str | None = None  # why status is "failed" or "unparsed"


class Parser(typing.Protocol):
    def parse(self, body: bytes, url: str, content_type: str | None) -> ParseResult: ...
