"""Forwarding proxies on loopback for tests: an HTTP proxy (plain requests and CONNECT) and a SOCKS5 one.

Each logs what it was asked to reach, so a test judges the route from the proxy's log and the
server's. Names are resolved through the ``resolve`` map given (like ``http.resolve``): a name the map
does not know is refused, so no test makes a proxy send a DNS query, and an address outside loopback
is refused too, so no test makes one send a packet off the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import ssl
import struct
from dataclasses import dataclass, field


def _loopback(host: str, resolve: dict[str, str]) -> str:
    address = resolve.get(host.lower(), host)
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        raise OSError(f"test proxy: no address for {host}") from None
    if not ip.is_loopback:
        raise OSError(f"test proxy: {address} is not loopback")
    return str(ip)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _splice(a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                  b: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
    await asyncio.gather(_pipe(a[0], b[1]), _pipe(b[0], a[1]))


@dataclass
class _Server:
    resolve: dict[str, str] = field(default_factory=dict)
    log: list[tuple[str, str]] = field(default_factory=list)  # (method or address type, target)
    port: int = 0
    ssl_context: ssl.SSLContext | None = None  # an https:// proxy: TLS between the crawler and the proxy
    _server: asyncio.base_events.Server | None = None
    _tasks: set[asyncio.Task] = field(default_factory=set)

    async def __aenter__(self):
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class HttpProxy(_Server):
    """Absolute-form requests are forwarded one per connection (so each is logged); CONNECT is tunnelled."""

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, version = request_line.split(" ")
        self.log.append((method, target))
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            try:
                upstream = await asyncio.open_connection(_loopback(host.strip("[]"), self.resolve), int(port))
            except OSError:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await _splice((reader, writer), upstream)
            return
        scheme, _, rest = target.partition("://")
        authority, slash, path = rest.partition("/")
        host, _, port = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "80")
        try:
            upstream = await asyncio.open_connection(_loopback(host, self.resolve), int(port or 80))
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        headers = [h for h in header_lines if h and not h.lower().startswith(("proxy-", "connection:"))]
        upstream[1].write(f"{method} {slash}{path} {version}\r\n".encode("latin-1")
                          + "".join(h + "\r\n" for h in headers + ["Connection: close"]).encode("latin-1")
                          + b"\r\n")
        await upstream[1].drain()
        await _splice((reader, writer), upstream)


class Socks5Proxy(_Server):
    """SOCKS5 without authentication, CONNECT only; logs ("ipv4" | "ipv6" | "name", "host:port")."""

    @property
    def url(self) -> str:
        return f"socks5://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        version, count = await reader.readexactly(2)
        await reader.readexactly(count)
        writer.write(b"\x05\x00")
        version, command, _, kind = await reader.readexactly(4)
        if kind == 1:
            host, label = str(ipaddress.IPv4Address(await reader.readexactly(4))), "ipv4"
        elif kind == 4:
            host, label = str(ipaddress.IPv6Address(await reader.readexactly(16))), "ipv6"
        else:
            size = (await reader.readexactly(1))[0]
            host, label = (await reader.readexactly(size)).decode("ascii"), "name"
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        self.log.append((label, f"{host}:{port}"))
        try:
            upstream = await asyncio.open_connection(_loopback(host, self.resolve), port)
        except OSError:
            writer.write(b"\x05\x04\x00\x01" + bytes(6))  # host unreachable
            return
        writer.write(b"\x05\x00\x00\x01" + bytes(6))
        await writer.drain()
        await _splice((reader, writer), upstream)
