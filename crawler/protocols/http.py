"""HTTP and HTTPS through aiohttp, with our own redirects, limits and address policy.

Why the knobs below:
- Redirects are never followed here: the fetcher normalizes, filters and
  robots-checks every hop itself (DESIGN 4).
- Decompression is ours (crawler.protocols.decoding), not aiohttp's, so the
  archive keeps the bytes as served and a decompression bomb never allocates
  more than ``http.content_limit``.
- Names go through crawler.protocols.dns (pins, cache, cap, address policy) on
  every new connection; aiohttp's own DNS cache is off so nothing bypasses it.
- Through a proxy (crawler.protocols.proxy) the connection is the proxy's, so the
  target's name is resolved and checked here first: a name with any refused
  address is refused before the proxy hears of it. What the proxy then resolves
  on its own is out of our sight (README, "HTTPS and proxies").
- TLS failures are their own kind, in OpenSSL's words (crawler.protocols.tls).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import sys
import time
from typing import Any

import aiohttp

from crawler.config import CrawlerConfig
from crawler.errors import (
    BlockedAddress,
    ConnectError,
    DnsError,
    FetchError,
    FetchTimeout,
    ProtocolViolation,
    ProxyError,
    TlsError,
)
from crawler.protocols import tls
from crawler.protocols.base import Response, request_clock
from crawler.protocols.decoding import ACCEPT_ENCODING, Decoder
from crawler.protocols.dns import AddressPolicy, PolicyResolver
from crawler.protocols.proxy import ProxyRoutes

_CHUNK = 64 * 1024
_MAX_PASSED_HOSTS = 100_000


class _ReadyConnector(aiohttp.TCPConnector):
    """Tells ``request_clock`` when a request's connection is ready (new or reused): its send."""

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        conn = await super().connect(req, traces, timeout)
        clock = request_clock.get()
        if clock is not None:
            clock.sent()
        return conn


class HttpProtocol:
    def __init__(self, cfg: CrawlerConfig) -> None:
        self.cfg = cfg.http
        self.policy = AddressPolicy(cfg.http)
        self.routes = ProxyRoutes.from_config(cfg.http)
        self.resolver = PolicyResolver(cfg.http, exempt=self.routes.proxy_hosts)
        self.ssl = tls.client_context(cfg.http.tls)
        connector = _ReadyConnector(
            # The fetcher's workers are the limit (and can change live); a pool limit here
            # would only queue requests inside aiohttp and inflate their measured time.
            limit=0,
            limit_per_host=0,
            resolver=self.resolver,
            use_dns_cache=False,
            ssl=self.ssl,
        )
        timeout = aiohttp.ClientTimeout(
            total=cfg.http.timeout.total, sock_connect=cfg.http.timeout.connect, sock_read=cfg.http.timeout.read
        )
        self.headers = {
            "User-Agent": cfg.http.effective_user_agent,
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        # No skip_auto_headers: our Accept and Accept-Encoding already stop aiohttp adding its own, and
        # a skip list costs every request a header copy and merge.
        self.session = self._session(connector, timeout)
        # SOCKS proxies are a connector of their own, so they get a session of their own.
        self.socks: dict[str, aiohttp.ClientSession] = {}
        for scheme, proxy in self.routes.by_scheme.items():
            if proxy.scheme.startswith("socks"):
                from crawler.protocols.socks import SocksConnector

                self.socks[scheme] = self._session(
                    SocksConnector(proxy, self.resolver, limit=0, limit_per_host=0, ssl=self.ssl), timeout)
        # Hosts whose literal check passed: the answer depends on the host alone, and parsing it as an
        # address on every request (an exception for every name) was a visible share of a fetch's CPU.
        self._passed_hosts: set[str] = set()

    def _session(self, connector: aiohttp.BaseConnector, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            headers=self.headers,
        )

    async def _route(self, target: Any, host: str) -> tuple[aiohttp.ClientSession, dict[str, Any]]:
        """The session (and proxy argument) for this request; refuses a proxied target the guard refuses."""
        proxy = self.routes.by_scheme.get(target.scheme)
        exempt = host in self.resolver.exempt  # the proxy's own name: the resolver lets it through
        if proxy is not None and self.routes.bypasses(host):
            proxy = None
        if proxy is None and not exempt:
            return self.session, {}  # direct: the resolver applies the policy on the connection
        guard = not self.policy.allow_private
        if not _is_ip(host) and (guard or (proxy is not None and self.routes.networks)):
            addresses = [r["host"] for r in await self.resolver.lookup(host, target.port or 0, socket.AF_UNSPEC)]
            if proxy is not None and self.routes.bypasses(host, addresses):
                proxy = None
            if guard and (proxy is not None or exempt) and not all(self.policy.allows(a) for a in addresses):
                # Stricter than a direct connection (which uses the allowed addresses only): the proxy
                # picks among the addresses itself.
                raise BlockedAddress(f"{host} resolves to a private address (http.allow_private_networks is false)")
        if proxy is None:
            return self.session, {}
        socks = self.socks.get(target.scheme)
        if socks is not None:
            return socks, {}
        return self.session, {"proxy": proxy}

    async def fetch(self, url: str, extra_headers: dict[str, str] | None = None, *,
                    limit: int | None = None) -> Response:
        started = time.monotonic()
        try:
            target = aiohttp.client.URL(url)  # parsed once: the session takes the URL object as it is
            host = target.host or ""
        except ValueError as exc:
            raise ProtocolViolation(f"invalid URL: {exc}", url) from exc
        try:
            if host not in self._passed_hosts:
                self.policy.check_literal(host)
                if len(self._passed_hosts) >= _MAX_PASSED_HOSTS:
                    self._passed_hosts.clear()
                self._passed_hosts.add(host)
            session, via = await self._route(target, host) if self.routes.by_scheme else (self.session, {})
            async with session.get(target, allow_redirects=False, headers=extra_headers or None,
                                   compress=None, **via) as resp:
                # aiohttp releases the connection as soon as the body is in (a small page: before we get
                # here), so ask the protocol it was read through; WARC-IP-Address comes from this.
                conn = resp.connection
                protocol = conn.protocol if conn else getattr(resp, "_protocol", None)
                transport = getattr(protocol, "transport", None)
                clock = request_clock.get()
                if clock is not None:
                    clock.answered()
                # Through a proxy the peer is the proxy, not the site: no address is better than a wrong one.
                peer = transport.get_extra_info("peername") if transport and not via and session is self.session \
                    else None
                limit = self.cfg.content_limit if limit is None else min(limit, self.cfg.content_limit)
                decoder = Decoder(resp.headers.get("Content-Encoding"), limit)
                pieces: list[bytes] = []  # joined once at the end: no copy per chunk, none for a single chunk
                size = 0
                raw_cut = False
                async for chunk in resp.content.iter_chunked(_CHUNK):
                    # Cap the raw bytes too: a huge compressed body is as bad as a huge plain one.
                    raw_cut = size + len(chunk) > limit
                    if raw_cut:
                        chunk = chunk[: limit - size]
                    pieces.append(chunk)
                    size += len(chunk)
                    # Once the decoded body is full the rest is only read, up to the limit: the archive then
                    # holds every byte served (a small gzip body of a large page), not a cut stream. A body sent as
                    # it is is the raw one (below): the decoder would only keep a second list of the same chunks.
                    if not decoder.identity:
                        decoder.feed(chunk)
                    if size == limit:
                        # Exactly the limit is complete only at the end; waiting for more to know would
                        # only spend the read timeout.
                        raw_cut = raw_cut or not resp.content.at_eof()
                        break
                decoder.truncated = decoder.truncated or raw_cut  # for a body sent as it is, the raw cut alone
                raw_body = b"".join(pieces)
                # Sent as it is, the body decoded is the raw one, cut at the same limit: the same object, so a
                # page that came in several chunks is not joined twice, held twice and sent twice to a parse
                # process (in a crawl of the seven trees 973 of 17,336 responses, 178 MB of ~530: docs/benchmarks.md).
                body = raw_body if decoder.identity else decoder.finish()
                return Response(
                    url=url,
                    status=resp.status,
                    reason=resp.reason or "",
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
                    raw_body=raw_body,
                    body=body,
                    truncated=decoder.truncated,
                    raw_truncated=raw_cut,
                    http_version=f"{resp.version.major}.{resp.version.minor}" if resp.version else "1.1",
                    request_headers=[(k, v) for k, v in resp.request_info.headers.items()],
                    peer_ip=peer[0] if peer else None,
                    elapsed=time.monotonic() - started,
                )
        except FetchError as exc:
            exc.url = url
            raise
        except Exception as exc:
            error = _fetch_error(exc, url)
            if error is None:
                raise
            raise error from exc

    async def aclose(self) -> None:
        await self.session.close()
        for session in self.socks.values():
            await session.close()
        # Let the transports close before the loop goes away.
        await asyncio.sleep(0)


def _fetch_error(exc: Exception, url: str) -> FetchError | None:
    """The FetchError a client library's exception stands for; None if none (a bug: raised as it is)."""
    # In this order: some of these are subclasses of ones further down.
    if isinstance(exc, TimeoutError):
        return FetchTimeout("timed out", url)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return DnsError(f"cannot resolve: {exc.os_error}", url)
    if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):  # before ClientConnectorError: a subclass of it
        return TlsError(tls.describe(exc), url)
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return ProxyError(f"cannot connect to the proxy: {exc.os_error.strerror or exc.os_error}", url)
    if isinstance(exc, aiohttp.ClientHttpProxyError):  # before ClientResponseError: a subclass of it
        return ProxyError(f"the proxy answered {exc.status} {exc.message}".rstrip(), url)
    socks = sys.modules.get("crawler.protocols.socks")  # not loaded: no SOCKS proxy, so none of its errors
    if socks is not None and isinstance(exc, socks.ERRORS):
        return ProxyError(f"socks proxy: {exc}", url)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectError(f"cannot connect: {exc.os_error.strerror or exc.os_error}", url)
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ClientResponseError, aiohttp.InvalidURL)):
        return ProtocolViolation(f"{exc.__class__.__name__}: {exc}", url)
    if isinstance(exc, (aiohttp.ClientError, OSError)):
        return ConnectError(f"{exc.__class__.__name__}: {exc}", url)
    return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
