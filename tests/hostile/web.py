"""A hostile test web on loopback: normal pages next to every kind of broken or malicious server.

``async with hostile_web() as web:`` starts one server per host on its own
127.0.9.N address (port 0), so every hostile case is a distinct host with its
own politeness queue, and returns a :class:`HostileWeb` with the base URLs, the
seed, the pages a crawl must fetch, the paths robots.txt forbids, and the log of
every request each server saw. ``web.crawl_args()`` gives the ``-D`` overrides
a crawl of it needs: the loopback allowance (``http.private_allowlist``), the
``http.resolve`` pins for its host names (no DNS query leaves the machine: one
name resolves to nothing, one to a private address) and short timeouts.

Used by tests/hostile/ and bench/bench_hostile_memory.py. The root page links
to everything; see ``HOSTILE_CASES`` for the list.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache
from urllib.parse import parse_qsl, urlencode

from aiohttp import web

from tests.hostile.raw import RawServer

UNRESOLVABLE = "nowhere.hostile.test"  # http.resolve maps it to '': fails like an unknown name
PINNED_PRIVATE = "intranet.hostile.test"  # http.resolve maps it to 192.168.1.1
PRIVATE_LITERAL = "http://10.1.2.3/admin"
BOMB_SIZE = 200 * 1024 * 1024  # zeros behind a ~200 KB gzip body
BIG_PAGE = 20 * 1000 * 1000
ROBOTS_BIG = 5 * 1000 * 1000
FACETS, FACET_VALUES = 6, 6
DISALLOW = "User-agent: *\nDisallow: /private/\n"
# Trap entry points, deep enough that a 3-round crawl runs into the limits that stop them.
REPEAT_START = "/rep/a/b/a/b/a/b/"  # its link adds a fourth a/b: over urls.max_segment_repeats (3)
CONCAT_START = "/concat/page.html/page.html/page.html"  # its link adds a fourth page.html
GROW_START = "/grow?q=" + "g" * 600  # doubles per link: 1200, then 2400, over urls.max_length (2048)

# role -> (what it serves, what the crawler must do). docs/reliability.md is the long form.
HOSTILE_CASES: dict[str, str] = {
    "main": "normal pages linking to every case below; robots.txt disallows /private/",
    "depth": "infinite relative-link depth /depth/d1/d2/d3/...",
    "calendar": "infinite calendar ?year=N+1 (and N-1)",
    "repeat": "repeating path segments /rep/a/b/a/b/...",
    "concat": "relative 'page.html/' links concatenating without end",
    "grow": "a query doubling in length on every link",
    "facets": "a facet explosion: every page links to each extra facet=value",
    "loop": "a redirect loop /loop/1 -> /loop/2 -> /loop/1",
    "chain": "a 30-hop redirect chain",
    "escape": "redirects to file:///etc/passwd, to a private IP and to a name pinned to a private IP",
    "bomb": "a gzip bomb: 200 MB of zeros in ~200 KB",
    "endless": "an endless chunked body",
    "big": "a 20 MB page",
    "charset": "invalid charsets (unknown name, lying header, lying <meta>)",
    "binary": "random bytes served as text/html",
    "flaky": "500 on every second request",
    "busy": "429 on every request, Retry-After: 1",
    "robots_big": "a 5 MB robots.txt (rules first, then junk)",
    "robots_random": "a robots.txt of random bytes",
    "robots_slow": "a robots.txt that never answers",
    "hang": "accepts, reads, never answers",
    "trickle": "sends one byte per second",
    "reset": "resets the connection mid-body",
    "bad_header": "invalid header bytes",
    "bad_status": "an invalid status line",
    "huge_header": "a 1 MiB header line",
    "endless_headers": "headers that never end",
}
RAW_ROLES = ("hang", "trickle", "reset", "bad_header", "bad_status", "huge_header", "endless_headers")


@cache
def gzip_bomb() -> bytes:
    """200 MB of zeros as one gzip stream, computed once per process (about a second)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    chunks = [comp.compress(zeros) for _ in range(BOMB_SIZE >> 20)]
    chunks.append(comp.flush())
    return b"".join(chunks)


@cache
def big_page() -> bytes:
    para = b"<p>" + b"A long page of text that goes on and on. " * 20 + b"</p>\n"
    body = b"<!DOCTYPE html><html><head><title>big</title></head><body>" + para * (BIG_PAGE // len(para))
    return body + b"</body></html>"


@cache
def robots_big() -> bytes:
    junk = b"# filler line of a robots.txt far over any sane size\n"
    return DISALLOW.encode() + junk * (ROBOTS_BIG // len(junk))


def html(title: str, links: list[str], extra: str = "") -> web.Response:
    anchors = "".join(f'<a href="{u}">{u[:40]}</a>\n' for u in links)
    return web.Response(text=f"<html><head><title>{title}</title>{extra}</head><body>{anchors}</body></html>",
                        content_type="text/html")


@dataclass
class HostileWeb:
    bases: dict[str, str]  # role -> base URL
    hits: list[tuple[str, str]] = field(default_factory=list)  # (role, path with query) per request

    @property
    def seed(self) -> str:
        return self.bases["main"] + "/"

    def url(self, role: str, path: str = "/") -> str:
        return self.bases[role] + path

    @property
    def normal_pages(self) -> list[str]:
        """Pages a crawl must fetch (status success)."""
        main = [self.url("main", p) for p in ("/", "/a.html", "/b.html", "/c.html", "/d.html")]
        return main + [self.url("robots_big", "/ok.html"), self.url("robots_random", "/ok.html")]

    @property
    def disallowed(self) -> list[tuple[str, str]]:
        """(role, path prefix) that robots.txt forbids: the servers must never see a request for them."""
        return [("main", "/private/"), ("robots_big", "/private/")]

    def requested(self, role: str) -> list[str]:
        return [path for r, path in self.hits if r == role]

    def crawl_args(self) -> list[str]:
        """-D overrides: loopback reachable but nothing else private, pinned names, short timeouts."""
        return [
            "-D", "http.allow_private_networks=false",
            "-D", "http.private_allowlist=[127.0.0.0/8]",
            "-D", f"http.resolve={{{UNRESOLVABLE}: '', {PINNED_PRIVATE}: 192.168.1.1}}",
            "-D", "http.timeout.connect=1s", "-D", "http.timeout.read=1s", "-D", "http.timeout.total=3s",
        ]


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _Routes:
    """The aiohttp handlers of each role; ``web.bases`` is read at request time (all servers are up by then)."""

    def __init__(self, hw: HostileWeb) -> None:
        self.hw = hw
        self.flaky_count = 0

    def for_role(self, role: str) -> Handler:
        return getattr(self, role)

    async def main(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/robots.txt":
            return web.Response(text=DISALLOW)
        if path == "/":
            hw = self.hw
            links = ["/a.html", "/b.html", "/c.html", "/private/secret.html", "file:///etc/passwd",
                     PRIVATE_LITERAL, f"http://{PINNED_PRIVATE}/", f"http://{UNRESOLVABLE}/"]
            links += [hw.url("depth", "/depth/d1/"), hw.url("calendar", "/cal?year=2000"),
                      hw.url("repeat", REPEAT_START), hw.url("concat", CONCAT_START),
                      hw.url("grow", GROW_START), hw.url("facets", "/shop"),
                      hw.url("loop", "/loop/1"), hw.url("chain", "/chain/0"),
                      hw.url("escape", "/to-file"), hw.url("escape", "/to-ip"), hw.url("escape", "/to-name"),
                      hw.url("bomb", "/bomb"), hw.url("endless", "/endless"), hw.url("big", "/big"),
                      hw.url("binary", "/binary"), hw.url("robots_big", "/"), hw.url("robots_random", "/"),
                      # Also linked from here, so that a normal page is not first seen in the last round,
                      # where one slow answer on a loaded machine would leave it unfetched.
                      hw.url("robots_big", "/ok.html"), hw.url("robots_random", "/ok.html"),
                      hw.url("robots_slow", "/"), *[hw.url("charset", f"/{c}") for c in ("unknown", "lie", "meta")],
                      *[hw.url("flaky", f"/f{i}") for i in range(4)], *[hw.url("busy", f"/b{i}") for i in range(3)],
                      *[hw.url(role, "/page") for role in RAW_ROLES]]
            return html("hostile web", links)
        if path in ("/a.html", "/b.html", "/c.html"):
            return html(path, ["/d.html", "/private/other.html"])
        if path == "/d.html":
            return html(path, ["/"])
        return web.Response(status=404)

    async def depth(self, request: web.Request) -> web.StreamResponse:
        level = request.path.rstrip("/").count("/")
        return html("depth", [f"d{level}/"])

    async def calendar(self, request: web.Request) -> web.StreamResponse:
        year = int(request.query.get("year", "2000"))
        return html(f"calendar {year}", [f"/cal?year={year + 1}", f"/cal?year={year - 1}"])

    async def repeat(self, request: web.Request) -> web.StreamResponse:
        return html("repeat", ["a/b/"])

    async def concat(self, request: web.Request) -> web.StreamResponse:
        return html("concat", ["page.html/"])  # served for any suffix, as misconfigured servers do

    async def grow(self, request: web.Request) -> web.StreamResponse:
        q = request.query.get("q", "g")
        return html("grow", ["/grow?q=" + q + q])

    async def facets(self, request: web.Request) -> web.StreamResponse:
        chosen = dict(parse_qsl(request.query_string))
        links = [f"/shop?{urlencode({**chosen, f'f{i}': f'v{v}'})}"
                 for i in range(FACETS) if f"f{i}" not in chosen for v in range(FACET_VALUES)]
        return html("shop", links)

    async def loop(self, request: web.Request) -> web.StreamResponse:
        target = "/loop/2" if request.path == "/loop/1" else "/loop/1"
        return web.Response(status=302, headers={"Location": target})

    async def chain(self, request: web.Request) -> web.StreamResponse:
        n = int(request.path.rsplit("/", 1)[1]) if request.path.rsplit("/", 1)[1].isdigit() else 30
        if n >= 30:
            return html("end of chain", [])
        return web.Response(status=301, headers={"Location": f"/chain/{n + 1}"})

    async def escape(self, request: web.Request) -> web.StreamResponse:
        targets = {"/to-file": "file:///etc/passwd", "/to-ip": PRIVATE_LITERAL,
                   "/to-name": f"http://{PINNED_PRIVATE}/secret"}
        if request.path in targets:
            return web.Response(status=302, headers={"Location": targets[request.path]})
        return web.Response(status=404)

    async def bomb(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=gzip_bomb(), headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})

    async def endless(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        chunk = b"<p>" + b"more " * 2000 + b"</p>\n"
        with contextlib.suppress(ConnectionError):
            while True:  # until the client gives up
                await resp.write(chunk)
                await asyncio.sleep(0.001)
        return resp

    async def big(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=big_page(), content_type="text/html")

    async def charset(self, request: web.Request) -> web.StreamResponse:
        latin = "<html><head><title>caf\xe9</title></head><body>na\xefve</body></html>".encode("latin-1")
        if request.path == "/unknown":
            return web.Response(body=latin, headers={"Content-Type": "text/html; charset=x-no-such-charset"})
        if request.path == "/lie":
            return web.Response(body=latin + b"\xff\xfe\x80", headers={"Content-Type": "text/html; charset=utf-8"})
        if request.path == "/meta":
            body = b'<html><head><meta charset="utf-99"><title>m\xe9ta</title></head><body>x</body></html>'
            return web.Response(body=body, headers={"Content-Type": "text/html"})
        return web.Response(status=404)

    async def binary(self, request: web.Request) -> web.StreamResponse:
        noise = random.Random(7).randbytes(100_000)
        return web.Response(body=noise, headers={"Content-Type": "text/html"})

    async def flaky(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        self.flaky_count += 1
        if self.flaky_count % 2 == 0:
            return web.Response(status=500, text="every second request fails")
        return html("flaky " + request.path, [])

    async def busy(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        return web.Response(status=429, headers={"Retry-After": "1"}, text="slow down")

    async def robots_big(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(body=robots_big(), content_type="text/plain")
        return html(request.path, ["/ok.html", "/private/p.html"])

    async def robots_random(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return web.Response(body=random.Random(11).randbytes(20_000), content_type="text/plain")
        return html(request.path, ["/ok.html"])

    async def robots_slow(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            await asyncio.Event().wait()
        return html(request.path, ["/never.html"])


def _aiohttp_roles() -> list[str]:
    return [r for r in HOSTILE_CASES if r not in RAW_ROLES]


@contextlib.asynccontextmanager
async def hostile_web(prefix: str = "127.0.9") -> AsyncIterator[HostileWeb]:
    """Start every host of the hostile web on ``prefix``.N addresses; stop them all on exit."""
    hw = HostileWeb(bases={})
    routes = _Routes(hw)
    # Built before serving (cached for the process): computed inside a handler, the bomb would stall
    # every server of the web for a second and turn the crawl's robots.txt fetches into timeouts.
    for build in (gzip_bomb, big_page, robots_big):
        await asyncio.to_thread(build)
    runners: list[web.AppRunner] = []
    raws: list[RawServer] = []
    try:
        for n, role in enumerate(HOSTILE_CASES, start=1):
            host = f"{prefix}.{n}"
            if role in RAW_ROLES:
                raw = RawServer(host, role, lambda _h, path, role=role: hw.hits.append((role, path)))
                await raw.start()
                raws.append(raw)
                hw.bases[role] = raw.base_url
                continue
            runner = web.AppRunner(_app(role, routes.for_role(role), hw), access_log=None,
                                   handler_cancellation=True, shutdown_timeout=0.5)
            await runner.setup()
            runners.append(runner)
            await web.TCPSite(runner, host, 0).start()
            hw.bases[role] = f"http://{host}:{runner.addresses[0][1]}"
        yield hw
    finally:
        for raw in raws:
            await raw.stop()
        for runner in runners:
            await runner.cleanup()


def _app(role: str, serve: Handler, hw: HostileWeb) -> web.Application:
    @web.middleware
    async def log_hits(request: web.Request, handler: Handler) -> web.StreamResponse:
        hw.hits.append((role, request.path_qs))
        return await handler(request)

    app = web.Application(middlewares=[log_hits])
    app.router.add_route("*", "/{tail:.*}", serve)
    return app
