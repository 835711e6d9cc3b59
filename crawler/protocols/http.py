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
_MAX_PASSED_HOSTS = 100_000


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
        # No skip_auto_headers: our Accept and Accept-Encoding already stop aiohttp adding its own, and
        # a skip list costs every request a header copy and merge.
        self.session = aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            headers=self.headers,
        )
        # Hosts whose literal check passed: the answer depends on the host alone, and parsing it as an
        # address on every request (an exception for every name) was a visible share of a fetch's CPU.
        self._passed_hosts: set[str] = set()

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
            async with self.session.get(target, allow_redirects=False, headers=extra_headers or None,
                                        compress=None) as resp:
                transport = resp.connection.transport if resp.connection else None
                peer = transport.get_extra_info("peername") if transport else None
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
                    # holds every byte served (a small gzip body of a large page), not a cut stream.
                    decoder.feed(chunk)
                    if size == limit:
                        # Exactly the limit is complete only at the end; waiting for more to know would
                        # only spend the read timeout.
                        raw_cut = raw_cut or not resp.content.at_eof()
                        break
                decoder.truncated = decoder.truncated or raw_cut
                body = decoder.finish()
                return Response(
                    url=url,
                    status=resp.status,
                    reason=resp.reason or "",
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
                    raw_body=b"".join(pieces),
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
