"""file: URLs read from the local disk, off unless ``protocols.file.enabled``.

Off by default because seeds and outlinks are often untrusted: a page linking
to ``file:///etc/passwd`` must not make the crawler archive it. A directory is
answered with a small HTML listing, so a crawl can walk a tree of files.
"""

from __future__ import annotations

import html
import mimetypes
import os
import time
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import aiofiles
import aiofiles.os

from crawler.config import CrawlerConfig
from crawler.errors import BlockedAddress, ConnectError, ProtocolViolation
from crawler.protocols.base import Response


class FileProtocol:
    def __init__(self, cfg: CrawlerConfig) -> None:
        self.enabled = cfg.protocols.file.enabled
        self.limit = cfg.http.content_limit

    async def fetch(self, url: str, extra_headers: dict[str, str] | None = None, *,
                    limit: int | None = None) -> Response:
        started = time.monotonic()
        cap = self.limit if limit is None else min(limit, self.limit)
        if not self.enabled:
            raise BlockedAddress("file: URLs are off (protocols.file.enabled is false)", url)
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise ProtocolViolation(f"file: URL names another machine ({parts.netloc})", url)
        path = Path(unquote(parts.path))
        try:
            if await aiofiles.os.path.isdir(path):
                body, ctype = _listing(path, url), "text/html; charset=utf-8"
                truncated = len(body) > cap
                body = body[:cap]
            else:
                async with aiofiles.open(path, "rb") as fh:
                    body = await fh.read(cap + 1)
                truncated = len(body) > cap
                body = body[:cap]
                ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        except (FileNotFoundError, NotADirectoryError):
            return _answer(url, 404, "Not Found", b"", None, started)
        except PermissionError:
            return _answer(url, 403, "Forbidden", b"", None, started)
        except OSError as exc:
            raise ConnectError(f"cannot read {path}: {exc.strerror or exc}", url) from exc
        response = _answer(url, 200, "OK", body, ctype, started)
        response.truncated = response.raw_truncated = truncated  # stored as read: the raw body is the body
        return response

    async def aclose(self) -> None:
        pass


def _listing(path: Path, url: str) -> bytes:
    base = url if url.endswith("/") else url + "/"
    items = []
    for name in sorted(os.listdir(path)):
        suffix = "/" if (path / name).is_dir() else ""
        items.append(f'<li><a href="{html.escape(base + quote(name) + suffix)}">{html.escape(name)}</a></li>')
    return f"<html><head><title>{html.escape(str(path))}</title></head><body><ul>{''.join(items)}</ul></body></html>".encode()


def _answer(url: str, status: int, reason: str, body: bytes, ctype: str | None, started: float) -> Response:
    headers = [("Content-Type", ctype)] if ctype else []
    return Response(url=url, status=status, reason=reason, headers=headers, raw_body=body, body=body,
                    elapsed=time.monotonic() - started)
