"""A small static-site HTTP server for `make demo`, tests and benches.

Tests use real HTTP on loopback (DESIGN.md section 7); this server is what they
crawl. Several instances on 127.x.y.z addresses stand for distinct hosts. It
records every request, so a test can check what the crawler fetched and how
many requests one host saw at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import mimetypes
import os
import signal
import ssl
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from aiohttp import web

REDIRECT_STATUSES = {301, 302, 303, 307, 308}
NOT_FOUND_BODY = (
    "<!DOCTYPE html><html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n"
)


@dataclass
class RequestRecord:
    path_qs: str  # as sent, still percent-encoded, so it compares with the crawler's URLs
    method: str
    status: int
    started: float  # time.monotonic()
    finished: float
    user_agent: str


def parse_redirects(text: str) -> dict[str, tuple[str, int]]:
    """Parse `_redirects` lines `SOURCE TARGET STATUS`; a bad line is an error, not a silent skip."""
    rules: dict[str, tuple[str, int]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[2].isdigit() or int(parts[2]) not in REDIRECT_STATUSES:
            raise ValueError(
                f"_redirects line {lineno}: expected 'SOURCE TARGET 301|302|303|307|308': {raw!r}"
            )
        rules[parts[0]] = (parts[1], int(parts[2]))
    return rules


class SiteServer:
    def __init__(self, root: Path, host: str = "127.0.0.1", port: int = 0, *, delay: float = 0.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.ssl_context = ssl_context  # serve HTTPS with this context (tests: a trustme certificate)
        self.root = Path(root).resolve()
        self.host = host
        self.port = port
        self.delay = delay
        self.base_url = ""
        self.requests: list[RequestRecord] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._runner: web.AppRunner | None = None
        # Re-read _redirects when it changes, so a test can edit the site between crawl rounds.
        self._redirects_key: tuple[int, int] | None = None
        self._redirects: dict[str, tuple[str, int]] = {}

    async def start(self) -> None:
        self._redirect_rules()  # a malformed _redirects fails here, not as 500s mid-crawl
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # access_log=None: the request log lives in self.requests; stdout/stderr stay quiet.
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.base_url = f"{'https' if self.ssl_context else 'http'}://{self.host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SiteServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def url(self, path: str = "/") -> str:
        return self.base_url + path

    def paths(self) -> list[str]:
        """The logged request paths (with query), in the order they were answered."""
        return [r.path_qs for r in self.requests]

    def _redirect_rules(self) -> dict[str, tuple[str, int]]:
        try:
            st = (self.root / "_redirects").stat()
        except FileNotFoundError:
            return {}
        key = (st.st_mtime_ns, st.st_size)
        if key != self._redirects_key:
            self._redirects = parse_redirects((self.root / "_redirects").read_text(encoding="utf-8"))
            self._redirects_key = key
        return self._redirects

    def _resolve(self, raw_path: str) -> Path | None:
        """Map a raw URL path to a file under root, or None. Decoding happens here, once,
        and the containment check runs on the fully resolved path (symlinks included)."""
        rel = unquote(raw_path.split("?", 1)[0]).lstrip("/")
        if "\x00" in rel:
            return None
        target = (self.root / rel).resolve()
        if not target.is_relative_to(self.root) or target == self.root / "_redirects":
            return None
        return target

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        status = 0  # stays 0 if cancelled (server shutting down) before an answer
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            resp = self._respond(request)
            status = resp.status
            return resp
        except Exception:
            status = 500
            raise
        finally:
            self.in_flight -= 1
            ua = request.headers.get("User-Agent", "")
            record = RequestRecord(request.raw_path, request.method, status, started, time.monotonic(), ua)
            self.requests.append(record)

    def _respond(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, headers={"Allow": "GET, HEAD"})
        raw_path = request.raw_path.split("?", 1)[0]
        rules = self._redirect_rules()
        rule = rules.get(raw_path) or rules.get(request.path)
        if rule:
            target, status = rule
            return web.Response(status=status, headers={"Location": target})
        target_path = self._resolve(raw_path)
        if target_path is not None and target_path.is_dir():
            if not raw_path.endswith("/"):
                # As real servers do, so relative links resolve; the lstrip keeps '//x' from becoming
                # a protocol-relative Location to another host.
                query = f"?{request.query_string}" if request.query_string else ""
                location = "/" + raw_path.lstrip("/") + "/" + query
                return web.Response(status=301, headers={"Location": location})
            target_path = target_path / "index.html"
        if target_path is None or not target_path.is_file():
            return web.Response(status=404, text=NOT_FOUND_BODY, content_type="text/html", charset="utf-8")
        return self._file_response(request, target_path)

    def _file_response(self, request: web.Request, path: Path) -> web.Response:
        # Whole-file web.Response rather than FileResponse: the status is final when the handler
        # returns (so the log is exact), and no Range or .gz-sibling surprises in tests.
        # ETag/Last-Modified with 304s are kept because the crawler refetches conditionally.
        st = path.stat()
        etag = f'"{st.st_mtime_ns:x}-{st.st_size:x}"'
        headers = {"ETag": etag}
        if_none_match = request.headers.get("If-None-Match")
        ims = request.if_modified_since
        if if_none_match is not None:
            fresh = if_none_match.strip() == "*" or etag in (t.strip() for t in if_none_match.split(","))
        else:
            fresh = ims is not None and int(st.st_mtime) <= ims.timestamp()
        ctype, encoding = mimetypes.guess_type(path.name)
        if encoding:  # 'x.tar.gz' is a gzip file to the client, not a tar with Content-Encoding
            ctype = "application/gzip" if encoding == "gzip" else None
        ctype = ctype or "application/octet-stream"
        if ctype == "text/html":
            ctype += "; charset=utf-8"
        resp = web.Response(status=304 if fresh else 200, headers=headers)
        resp.last_modified = st.st_mtime
        if not fresh:
            resp.body = path.read_bytes()
            resp.headers["Content-Type"] = ctype
        return resp


async def _serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with SiteServer(Path(args.root), args.host, args.port) as server:
        if args.port_file:
            tmp = f"{args.port_file}.tmp"
            Path(tmp).write_text(f"{server.port}\n", encoding="utf-8")
            os.replace(tmp, args.port_file)
        print(f"devserver: serving {server.root} at {server.base_url}/", file=sys.stderr, flush=True)
        try:
            await stop.wait()
        finally:
            # A stale port file would point the next `make demo` at a dead port.
            if args.port_file:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(args.port_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crawler.devserver", description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="folder to serve")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the listening port here once bound")
    args = parser.parse_args(argv)
    if not Path(args.root).is_dir():
        parser.error(f"--root {args.root}: not a directory")
    try:
        asyncio.run(_serve(args))
    except OSError as exc:
        print(f"devserver: {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
