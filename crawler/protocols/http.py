"""HTTP and HTTPS through aiohttp, with our own redirects, limits and address policy.

Why the knobs below:
- Redirects are never followed here: the fetcher normalizes, filters and
  robots-checks every hop itself (DESIGN 4).
- Decompression is ours, not aiohttp's, so the archive keeps the bytes as served
  and a decompression bomb never allocates more than ``http.content_limit``.
- Private, loopback and link-local addresses are refused after resolution unless
  ``http.allow_private_networks``; ``http.resolve`` pins names to addresses so
  tests and benches never send a DNS query off the machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
import zlib
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from crawler.config import CrawlerConfig, HttpConfig
from crawler.errors import BlockedAddress, ConnectError, DnsError, FetchError, FetchTimeout, ProtocolViolation
from crawler.protocols.base import Response

_CHUNK = 64 * 1024


def is_public_address(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    return ip.is_global and not ip.is_multicast


class PolicyResolver(AbstractResolver):
    """``http.resolve`` first, then the system resolver; refuses non-public addresses by policy."""

    def __init__(self, cfg: HttpConfig) -> None:
        self.pinned = {host.lower().rstrip("."): addr for host, addr in cfg.resolve.items()}
        self.allow_private = cfg.allow_private_networks
        self.fallback = aiohttp.ThreadedResolver()

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        name = host.lower().rstrip(".")
        if name in self.pinned:
            address = self.pinned[name]
            try:
                ip = ipaddress.ip_address(address)
            except ValueError:
                raise DnsError(f"cannot resolve {host} (http.resolve gives {address!r})") from None
            results: list[ResolveResult] = [
                {
                    "hostname": host, "host": str(ip), "port": port,
                    "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                    "proto": 0, "flags": socket.AI_NUMERICHOST,
                }
            ]
        else:
            try:
                results = await self.fallback.resolve(host, port, family)
            except OSError as exc:
                raise DnsError(f"cannot resolve {host}: {exc.strerror or exc}") from exc
        if not self.allow_private:
            results = [r for r in results if is_public_address(r["host"])]
            if not results:
                raise BlockedAddress(f"{host} resolves only to private addresses (http.allow_private_networks is false)")
        return results

    async def close(self) -> None:
        await self.fallback.close()


class _Decoder:
    """Content-Encoding decoding that stops at the size limit (no bomb gets further)."""

    def __init__(self, encoding: str | None, limit: int) -> None:
        self.limit = limit
        self.out = bytearray()
        self.truncated = False
        enc = (encoding or "identity").strip().lower()
        if enc in ("gzip", "x-gzip"):
            self.zobj: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self.zobj = zlib.decompressobj()
            self._deflate_fallback = True
        elif enc in ("identity", ""):
            self.zobj = None
        else:
            raise ProtocolViolation(f"unsupported Content-Encoding {encoding!r}")

    def feed(self, chunk: bytes) -> None:
        if self.truncated:
            return
        room = self.limit - len(self.out)
        if self.zobj is None:
            data = chunk[:room]
            if len(chunk) > room:
                self.truncated = True
        else:
            try:
                data = self.zobj.decompress(chunk, room + 1)
            except zlib.error:
                if getattr(self, "_deflate_fallback", False) and not self.out:
                    # Some servers send raw deflate without the zlib header.
                    self.zobj = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._deflate_fallback = False
                    return self.feed(chunk)
                raise ProtocolViolation("corrupt compressed body") from None
            if len(data) > room or self.zobj.unconsumed_tail:
                data = data[:room]
                self.truncated = True
        self.out += data


class HttpProtocol:
    def __init__(self, cfg: CrawlerConfig) -> None:
        self.cfg = cfg.http
        self.allow_private = cfg.http.allow_private_networks
        connector = aiohttp.TCPConnector(
            limit=cfg.fetcher.concurrency,
            limit_per_host=0,
            resolver=PolicyResolver(cfg.http),
            ttl_dns_cache=300,
        )
        timeout = aiohttp.ClientTimeout(
            total=cfg.http.timeout.total, sock_connect=cfg.http.timeout.connect, sock_read=cfg.http.timeout.read
        )
        self.headers = {
            "User-Agent": cfg.http.effective_user_agent,
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            "Accept-Encoding": "gzip, deflate",
        }
        self.session = aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            headers=self.headers,
            skip_auto_headers=("Accept-Encoding",),
        )

    def _check_literal(self, host: str) -> None:
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return
        if not self.allow_private and not is_public_address(host.strip("[]")):
            raise BlockedAddress(f"{host} is a private address (http.allow_private_networks is false)")

    async def fetch(self, url: str, extra_headers: dict[str, str] | None = None) -> Response:
        started = time.monotonic()
        try:
            host = aiohttp.client.URL(url).host or ""
        except ValueError as exc:
            raise ProtocolViolation(f"invalid URL: {exc}", url) from exc
        self._check_literal(host)
        headers = dict(extra_headers or {})
        try:
            async with self.session.get(url, allow_redirects=False, headers=headers, compress=None) as resp:
                transport = resp.connection.transport if resp.connection else None
                peer = transport.get_extra_info("peername") if transport else None
                decoder = _Decoder(resp.headers.get("Content-Encoding"), self.cfg.content_limit)
                raw = bytearray()
                async for chunk in resp.content.iter_chunked(_CHUNK):
                    # Cap the raw bytes too: a huge compressed body is as bad as a huge plain one.
                    raw += chunk[: max(0, self.cfg.content_limit - len(raw))]
                    decoder.feed(chunk)
                    if decoder.truncated or len(raw) >= self.cfg.content_limit:
                        decoder.truncated = True
                        break
                return Response(
                    url=url,
                    status=resp.status,
                    reason=resp.reason or "",
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
                    raw_body=bytes(raw),
                    body=bytes(decoder.out),
                    truncated=decoder.truncated,
                    http_version=f"{resp.version.major}.{resp.version.minor}" if resp.version else "1.1",
                    request_headers=[(k, v) for k, v in resp.request_info.headers.items()],
                    peer_ip=peer[0] if peer else None,
                    elapsed=time.monotonic() - started,
                )
        except FetchError as exc:
            exc.url = url
            raise
        except TimeoutError as exc:
            raise FetchTimeout("timed out", url) from exc
        except aiohttp.ClientConnectorDNSError as exc:
            raise DnsError(f"cannot resolve: {exc.os_error}", url) from exc
        except aiohttp.ClientConnectorError as exc:
            raise ConnectError(f"cannot connect: {exc.os_error.strerror or exc.os_error}", url) from exc
        except (aiohttp.ClientPayloadError, aiohttp.ClientResponseError, aiohttp.InvalidURL) as exc:
            raise ProtocolViolation(f"{exc.__class__.__name__}: {exc}", url) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise ConnectError(f"{exc.__class__.__name__}: {exc}", url) from exc

    async def aclose(self) -> None:
        await self.session.close()
        # Let the transports close before the loop goes away.
        await asyncio.sleep(0)
