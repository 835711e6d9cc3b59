"""HTTP and HTTPS through aiohttp, with our own redirects, limits and address policy.

Why the knobs below:
- Redirects are never followed here: the fetcher normalizes, filters and
  robots-checks every hop itself (DESIGN 4).
- Decompression is ours (crawler.protocols.decoding), not aiohttp's, so the
  archive keeps the bytes as served and a decompression bomb never allocates
  more than ``http.content_limit``.
- Names go through crawler.protocols.dns (pins, cache, cap, address policy) on
  every new connection; aiohttp's own DNS cache is off so nothing bypasses it.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from crawler.config import CrawlerConfig
from crawler.errors import ConnectError, DnsError, FetchError, FetchTimeout, ProtocolViolation
from crawler.protocols.base import Response
from crawler.protocols.decoding import ACCEPT_ENCODING, Decoder
from crawler.protocols.dns import AddressPolicy, PolicyResolver

_CHUNK = 64 * 1024


class HttpProtocol:
    def __init__(self, cfg: CrawlerConfig) -> None:
        self.cfg = cfg.http
        self.policy = AddressPolicy(cfg.http)
        self.resolver = PolicyResolver(cfg.http)
        connector = aiohttp.TCPConnector(
            # The fetcher's workers are the limit (and can change live); a pool limit here
            # would only queue requests inside aiohttp and inflate their measured time.
            limit=0,
            limit_per_host=0,
            resolver=self.resolver,
            use_dns_cache=False,
        )
        timeout = aiohttp.ClientTimeout(
            total=cfg.http.timeout.total, sock_connect=cfg.http.timeout.connect, sock_read=cfg.http.timeout.read
        )
        self.headers = {
            "User-Agent": cfg.http.effective_user_agent,
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        self.session = aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            headers=self.headers,
            skip_auto_headers=("Accept-Encoding",),
        )

    async def fetch(self, url: str, extra_headers: dict[str, str] | None = None) -> Response:
        started = time.monotonic()
        try:
            host = aiohttp.client.URL(url).host or ""
        except ValueError as exc:
            raise ProtocolViolation(f"invalid URL: {exc}", url) from exc
        headers = dict(extra_headers or {})
        try:
            self.policy.check_literal(host)
            async with self.session.get(url, allow_redirects=False, headers=headers, compress=None) as resp:
                transport = resp.connection.transport if resp.connection else None
                peer = transport.get_extra_info("peername") if transport else None
                decoder = Decoder(resp.headers.get("Content-Encoding"), self.cfg.content_limit)
                raw = bytearray()
                async for chunk in resp.content.iter_chunked(_CHUNK):
                    # Cap the raw bytes too: a huge compressed body is as bad as a huge plain one.
                    raw += chunk[: max(0, self.cfg.content_limit - len(raw))]
                    decoder.feed(chunk)
                    if decoder.truncated or len(raw) >= self.cfg.content_limit:
                        decoder.truncated = True
                        break
                body = decoder.finish()
                return Response(
                    url=url,
                    status=resp.status,
                    reason=resp.reason or "",
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
                    raw_body=bytes(raw),
                    body=body,
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
