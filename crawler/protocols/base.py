"""The protocol plugin interface and the response it returns."""

from __future__ import annotations

import contextvars
import typing
from dataclasses import dataclass, field

from crawler.plugins import Registry

if typing.TYPE_CHECKING:  # the parse side runs on the config's values, not its models (crawler/fetcher/parsepool.py)
    from crawler.config import CrawlerConfig


class RequestClock(typing.Protocol):
    """What the fetcher hears of a request's progress, to count its queue's delay as the server sees it."""

    def sent(self) -> None:
        """The request's connection is ready (new or reused): it is about to be written."""

    def answered(self) -> None:
        """The head of the answer is in: the server has read the request, however late it read it."""


# Set by the fetcher around a request. Politeness counts a queue's delay from the later of the two calls:
# a server may read a request a few milliseconds after the crawler writes it (a loaded nginx, a late
# accept) and read the next one at once, so only the answer bounds when it was read. Protocols without
# connections may ignore it: the fetcher then counts from the dispatch and the end.
request_clock: contextvars.ContextVar[RequestClock | None] = contextvars.ContextVar(
    "request_clock", default=None)

PROTOCOLS = Registry(
    "crawler.protocols",
    {
        "http": "crawler.protocols.http:HttpProtocol",
        "https": "crawler.protocols.http:HttpProtocol",
        "file": "crawler.protocols.file:FileProtocol",
    },
)

# Plugins a setting switches off: scheme -> (is it on, the setting that turns it on).
_SWITCHES: dict[str, typing.Callable[[CrawlerConfig], tuple[bool, str]]] = {
    "file": lambda cfg: (cfg.protocols.file.enabled, "protocols.file.enabled is false"),
}


def served_schemes(cfg: CrawlerConfig) -> dict[str, str]:
    """Every scheme a protocol plugin is registered for -> '' when it is enabled, else why it is not."""
    served = {}
    for name in PROTOCOLS.names():
        switch = _SWITCHES.get(name)
        on, why = switch(cfg) if switch is not None else (True, "")
        served[name] = "" if on else why
    return served


@dataclass(slots=True)
class Response:
    """One response as served: the raw body for the archive, the decoded body for parsers."""

    url: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    raw_body: bytes
    body: bytes
    truncated: bool = False  # body (decoded) cut at the content limit: parsers saw part of the page
    raw_truncated: bool = False  # raw_body cut: the archived payload lacks bytes the server sent (WARC-Truncated)
    http_version: str = "1.1"
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    peer_ip: str | None = None
    elapsed: float = 0.0

    def header(self, name: str) -> str | None:
        lower = name.lower()
        for key, value in self.headers:
            if key.lower() == lower:
                return value
        return None


class Protocol(typing.Protocol):
    """Fetches one URL without following redirects; raises crawler.errors.FetchError on failure.

    ``limit``, when given, caps the body below ``http.content_limit`` for this request: the protocol
    stops reading there and flags the response truncated (robots.txt needs only its first 500 KiB).
    """

    async def fetch(self, url: str, extra_headers: dict[str, str] | None = None, *,
                    limit: int | None = None) -> Response: ...

    async def aclose(self) -> None: ...


class ProtocolFactory(typing.Protocol):
    def __call__(self, cfg: CrawlerConfig) -> Protocol: ...
